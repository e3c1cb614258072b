"""A command line people enjoy (issue 22, point 1), through the real `archivist` process: quiet output,
a friendly empty state, `--json` that parses, `--version`, help on every option, title-or-id sources,
`sources delete`, `documents list/get/delete`, the owner's own files, and `config --http` entries that a
real MCP client connects with."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.support.cli_process import run_in_process
from tests.support.mcp_helpers import ok

ROOT = Path(__file__).resolve().parents[2]


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHIVIST_") and k != "DATABASE_URL"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)
    return env


def archivist(
    *args: str, env: dict[str, str], check: bool = True, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """`archivist ARGS` through `cli.main` in this process (tests/support/cli_process.py: a real process
    costs ~2 s of CPU to start), or as a real process (`process=True`): the tests of the entry point
    itself, of `--data-dir` (its own embedded PostgreSQL), of serving, and each command family once."""
    if not process:
        done = run_in_process(list(args), env)
    else:
        command = [sys.executable, "-c", "import cli; cli.main()", *args]
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL
        )
    if check:
        assert done.returncode == 0, f"archivist {' '.join(args)}: {done.returncode}\n{done.stderr[-3000:]}"
    return done


def as_json(*args: str, env: dict[str, str]) -> Any:
    return json.loads(archivist(*args, "--json", env=env).stdout)


@pytest.fixture(scope="module")
def kb(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A knowledge base whose MCP clients may only name files under `allowed/`."""
    allowed = tmp_path_factory.mktemp("allowed")
    yield cli_env(DATABASE_URL=database_url, ARCHIVIST_ALLOWED_PATHS=str(allowed))


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's own notes, outside ARCHIVIST_ALLOWED_PATHS."""
    folder = tmp_path_factory.mktemp("home") / "notes"
    folder.mkdir()
    (folder / "tea.md").write_text("# Tea\n\nGreen tea is steeped at 80 degrees for two minutes.\n")
    (folder / "coffee.md").write_text("# Coffee\n\nEspresso is brewed at nine bars of pressure.\n")
    return folder


def test_fresh_data_dir_sources_prints_one_friendly_line(tmp_path: Path) -> None:
    done = archivist("--data-dir", str(tmp_path / "kb"), "sources", env=cli_env(), process=True)
    assert done.stdout == "No sources yet. Add one with: archivist ingest PATH --source NAME\n"
    assert done.stderr == ""


def test_version() -> None:
    done = archivist("--version", env=cli_env(), process=True)
    assert re.fullmatch(r"archivist \d+\.\d+\S*\n", done.stdout), done.stdout


def parsers(parser: argparse.ArgumentParser, path: str = "archivist") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from parsers(child, f"{path} {name}")


def test_every_command_and_option_has_help() -> None:
    import cli

    missing = []
    top = cli.build_parser()
    commands = {action.dest: action for action in top._subparsers._group_actions[0]._choices_actions}
    for path, parser in parsers(top):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{path} {c.dest}" for c in action._choices_actions if not (c.help or "").strip()]
            elif action.help != argparse.SUPPRESS and not (action.help or "").strip():
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
        if path.count(" ") == 1:
            assert parser.epilog and "archivist" in parser.epilog, f"{path} has no example"
    assert not missing, "no help text: " + ", ".join(missing)
    assert set(commands) >= {"sources", "documents", "completion", "doctor"}


def test_completion_script() -> None:
    done = archivist("completion", "bash", env=cli_env())
    assert "archivist" in done.stdout and "complete" in done.stdout


def test_ingest_own_files_outside_allowed_paths(kb: dict[str, str], notes: Path) -> None:
    done = archivist("ingest", str(notes), "--source", "Kitchen notes", env=kb)
    assert "Kitchen notes: 2 new, 0 updated, 0 unchanged" in done.stdout and "2 documents" in done.stdout
    assert "ingesting" in done.stderr and "2/2" in done.stderr
    assert "allowed paths" not in done.stderr.lower()
    missing = archivist("ingest", str(notes / "nope.md"), "--source", "Kitchen notes", env=kb, check=False)
    assert missing.returncode == 1 and "no such file or directory" in missing.stderr
    assert "ARCHIVIST_ALLOWED_PATHS" not in missing.stderr and "server" not in missing.stderr


def test_ingest_source_must_exist_refuses_a_mistyped_title(kb: dict[str, str], notes: Path) -> None:
    refused = archivist("ingest", str(notes), "--source", "Kitchen nots", "--source-must-exist", env=kb, check=False)
    assert refused.returncode != 0 and "Kitchen nots" in refused.stderr
    assert all(s["title"] != "Kitchen nots" for s in as_json("sources", env=kb))  # nothing was created


def test_read_commands_print_json(kb: dict[str, str], notes: Path) -> None:
    sources = as_json("sources", env=kb)
    kitchen = next(s for s in sources if s["title"] == "Kitchen notes")
    assert kitchen["documents_count"] == 2
    by_title = as_json("documents", "list", "--source", "Kitchen notes", env=kb)
    by_id = as_json("documents", "list", "--source", kitchen["id"], env=kb)
    assert sorted(d["title"] for d in by_title) == ["Coffee", "Tea"] and by_title == by_id
    tea = next(d for d in by_title if d["title"] == "Tea")
    shown = as_json("documents", "get", tea["id"], env=kb)
    assert "80 degrees" in shown["content"]
    hits = as_json("search", "green tea temperature", "--source", "Kitchen notes", "-k", "1", env=kb)
    assert hits[0]["document_title"] == "Tea"
    assert as_json("jobs", env=kb) == []
    assert as_json("doctor", env=kb)["ok"] is True
    archivist("profile", "create", "kitchen", "--source", "Kitchen notes", env=kb)
    shown = as_json("profile", "show", "kitchen", env=kb)
    assert shown["source_ids"] == [kitchen["id"]]
    assert shown["sources"] == [{"id": kitchen["id"], "title": "Kitchen notes"}]  # titles beside the ids
    assert "Kitchen notes" in archivist("profile", "list", env=kb).stdout
    assert [p["name"] for p in as_json("profile", "list", env=kb)] == ["kitchen"]
    assert as_json("token", "list", env=kb) == []
    assert "items" in as_json("audit", env=kb)


def test_human_output_is_a_table(kb: dict[str, str], notes: Path) -> None:
    listed = archivist("sources", env=kb).stdout
    header, row = listed.splitlines()[:2]
    assert header.split()[:5] == ["title", "type", "version", "documents", "chunks"]
    assert row.startswith("Kitchen notes") and "\x1b[" not in listed  # no colour when piped
    report = archivist("doctor", env=kb).stdout
    assert "database" in report and "All good." in report and not report.lstrip().startswith("{")


def test_documents_delete_and_sources_delete_by_title(kb: dict[str, str], notes: Path) -> None:
    coffee = next(
        d for d in as_json("documents", "list", "--source", "Kitchen notes", env=kb) if d["title"] == "Coffee"
    )
    refused = archivist("documents", "delete", coffee["id"], env=kb, check=False)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    archivist("documents", "delete", coffee["id"], "--yes", env=kb)
    assert [d["title"] for d in as_json("documents", "list", "--source", "Kitchen notes", env=kb)] == ["Tea"]
    done = archivist("sources", "delete", "kitchen NOTES", "--yes", env=kb)
    assert "deleted source 'Kitchen notes'" in done.stdout
    assert all(s["title"] != "Kitchen notes" for s in as_json("sources", env=kb))
    gone = archivist("sources", "delete", "Kitchen notes", "--yes", env=kb, check=False)
    assert gone.returncode == 1 and "No source is named" in gone.stderr


def test_keyword_search_and_a_keyword_profile_end_to_end(kb: dict[str, str], tmp_path: Path) -> None:
    """`--type keyword` searches, `profile create --search-type keyword` stores it, and an agent
    confined to that profile (stdio) searches by keyword without naming a type."""
    folder = tmp_path / "brewing"
    folder.mkdir()
    (folder / "espresso.md").write_text("# Espresso\n\nEspresso is brewed at nine bars of pressure.\n")
    (folder / "tea.md").write_text("# Tea\n\nGreen tea is steeped at 80 degrees for two minutes.\n")
    archivist("ingest", str(folder), "--source", "Brewing", env=kb)
    hits = as_json("search", "espresso pressure", "--type", "keyword", "--source", "Brewing", env=kb)
    assert hits and hits[0]["document_title"] == "Espresso"
    assert {h["match_type"] for h in hits} == {"keyword"}
    archivist("profile", "create", "brew-kw", "--source", "Brewing", "--search-type", "keyword", env=kb)
    assert as_json("profile", "show", "brew-kw", env=kb)["search_type"] == "keyword"
    assert "keyword" in archivist("profile", "list", env=kb).stdout

    command = ["-c", "import cli; cli.main()", "serve", "--profile", "brew-kw"]
    params = StdioServerParameters(command=sys.executable, args=command, env=kb, cwd=str(ROOT))

    async def search_as_the_profile() -> dict[str, Any]:
        async with Client(params) as client:
            return await ok(client, "search_knowledge_base", query="espresso pressure")

    found = asyncio.run(search_as_the_profile())
    assert found["profile"] == "brew-kw" and found["search_type"] == "keyword", found
    assert found["results"][0]["document_title"] == "Espresso"
    assert {r["match_type"] for r in found["results"]} == {"keyword"}


# ---------- config --http: the printed entry connects a real client ----------


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def http_server(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    env = cli_env(DATABASE_URL=database_url, ARCHIVIST_DATA_DIR=str(tmp_path_factory.mktemp("http-data")))
    port = free_port()
    command = [sys.executable, "-c", "import cli; cli.main()", "serve", "--http", "--port", str(port)]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 180
    with httpx2.Client(timeout=2) as http:  # one for all the tries: a client costs ~55 ms of CPU to build
        while True:
            try:
                if http.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "serve --http did not start"
            time.sleep(0.3)
    yield url, env
    proc.terminate()
    proc.wait(timeout=15)


def printed_entry(client: str, url: str, env: dict[str, str]) -> tuple[dict[str, Any], str]:
    done = archivist("config", client, "--http", url, env=env)
    return json.loads(done.stdout)["mcpServers"]["archivist"], done.stderr


async def connects(url: str, headers: dict[str, str]) -> bool:
    try:
        async with Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers))) as client:
            return bool((await client.list_tools()).tools)
    except Exception:
        return False


def test_config_http_entries_connect(http_server: tuple[str, dict[str, str]]) -> None:
    url, env = http_server
    entry, note = printed_entry("claude-code", url, env)
    assert entry == {"type": "http", "url": url}, entry
    assert "archivist token create" in note and "--token-header" in note
    assert asyncio.run(connects(entry["url"], entry.get("headers", {})))

    created = archivist("token", "create", "--name", "laptop", env=env).stdout
    secret = next(word for word in created.split() if word.startswith("arch_"))
    entry, _ = printed_entry("claude-code", url, env)
    assert entry["headers"] == {"Authorization": "Bearer ${ARCHIVIST_TOKEN}"}
    headers = {k: v.replace("${ARCHIVIST_TOKEN}", secret) for k, v in entry["headers"].items()}
    assert asyncio.run(connects(entry["url"], headers))
    assert not asyncio.run(connects(entry["url"], {}))
    cursor, _ = printed_entry("cursor", url, env)
    assert cursor["headers"] == entry["headers"] and cursor["url"] == url
