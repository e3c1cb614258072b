"""Every command's failure paths, as a person meets them (issue 28), through the real `archivist` process.

Exit codes say what happened: 0 success, 1 failure, 2 usage. A failure prints `error: ...` naming the
item, then the next step, and never a traceback. Around them: `restore` over a knowledge base says
--force, a crawl of a missing page exits 1 naming the page (and leaves no empty source), `jobs ID` shows
a job's page errors, `serve --http` on a taken port says so before any ready line, `completion | head`
ends quietly, and `config` neither adds the current directory to ARCHIVIST_ALLOWED_PATHS silently nor
accepts a URL that is not an MCP endpoint.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.cli.test_cli import ROOT, archivist, cli_env
from tests.conftest import copy_data_dir
from tests.support.fixture_site import FixtureSite

NO_ID = str(uuid.UUID(int=1))


@pytest.fixture(scope="module")
def kb(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    allowed = tmp_path_factory.mktemp("allowed")
    private = {"ARCHIVIST_CRAWL_ALLOW_PRIVATE": "true", "ARCHIVIST_CRAWL_DELAY_SECONDS": "0"}
    return cli_env(DATABASE_URL=database_url, ARCHIVIST_ALLOWED_PATHS=str(allowed), **private)


@pytest.fixture(scope="module")
def site() -> Iterator[FixtureSite]:
    with FixtureSite() as running:
        yield running


@pytest.fixture(scope="module")
def stocked(kb: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A knowledge base with one source of two notes, and a backup of it."""
    folder = tmp_path_factory.mktemp("stock") / "notes"
    folder.mkdir()
    (folder / "tea.md").write_text("# Tea\n\n## Brewing\n\nGreen tea is steeped at 80 degrees for two minutes.\n")
    (folder / "coffee.md").write_text("# Coffee\n\nEspresso is brewed at nine bars of pressure.\n")
    archivist("ingest", str(folder), "--source", "Kitchen", env=kb)
    backup = tmp_path_factory.mktemp("backup") / "kb.backup"
    archivist("backup", str(backup), env=kb)
    return {"folder": folder, "backup": backup}


def run(*args: str, env: dict[str, str], process: bool = False) -> subprocess.CompletedProcess[str]:
    done = archivist(*args, env=env, check=False, process=process)
    assert "Traceback" not in done.stderr + done.stdout, f"archivist {' '.join(args)}:\n{done.stderr[-3000:]}"
    return done


def failed(code: int, *args: str, env: dict[str, str], says: tuple[str, ...] = (), process: bool = False) -> str:
    """Run a command expected to fail with `code`: `error: ...` then a next step, the words `says`."""
    done = run(*args, env=env, process=process)
    assert done.returncode == code, f"archivist {' '.join(args)}: {done.returncode}\n{done.stderr[-2000:]}"
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    if code == 1:
        error = next(i for i, line in enumerate(lines) if line.startswith("error: "))
        assert len(lines) > error + 1, f"no next step after the error: {done.stderr}"
    for word in says:
        assert word in done.stderr, f"{word!r} not in: {done.stderr}"
    return done.stderr


FAILURES: list[tuple[int, tuple[str, ...], tuple[str, ...]]] = [
    (2, ("no-such-command",), ("invalid choice",)),
    (1, ("ingest", "/no/such/notes", "--source", "Kitchen"), ("/no/such/notes",)),
    (1, ("search", "tea", "--source", "Nowhere"), ("Nowhere",)),
    (1, ("search", "tea", "--library", "Nowhere", "--version", "9.x"), ("Nowhere",)),
    (1, ("sources", "delete", "Nowhere", "--yes"), ("Nowhere",)),
    (2, ("sources", "delete", "Kitchen"), ("--yes",)),
    (1, ("documents", "get", NO_ID), (NO_ID,)),
    (1, ("documents", "get", "not-an-id"), ("not-an-id",)),
    (1, ("documents", "delete", NO_ID, "--yes"), (NO_ID,)),
    (1, ("documents", "list", "--source", "Nowhere"), ("Nowhere",)),
    (1, ("jobs", NO_ID), (NO_ID,)),
    (1, ("crawl", "ftp://example.com/"), ("ftp://example.com/",)),
    (2, ("sync",), ("--git",)),
    (1, ("sync", "Nowhere"), ("Nowhere",)),
    (1, ("profile", "show", "nobody"), ("nobody",)),
    (1, ("profile", "delete", "nobody"), ("nobody",)),
    (1, ("profile", "create", "p", "--source", "Nowhere"), ("Nowhere",)),
    (2, ("profile", "grant", "nobody"), ("--group",)),
    (2, ("token", "create", "--name", "t", "--expires", "soon"), ("soon",)),
    (2, ("token", "create", "--name", "t", "--rate", "fast"), ("fast",)),
    (1, ("token", "revoke", "nobody"), ("nobody",)),
    (2, ("audit", "--since", "yesterday"), ("yesterday",)),
    (1, ("restore", "/no/such/kb.backup"), ("/no/such/kb.backup",)),
    (1, ("export", "Nowhere", "/tmp/archivist-export-never"), ("Nowhere",)),
    (2, ("serve", "--http", "--tls-cert", "cert.pem"), ("--tls-key",)),
]


def test_every_failure_path_names_the_item_and_the_next_step(kb: dict[str, str], stocked: dict[str, Any]) -> None:
    wrong = []
    for code, args, says in FAILURES:
        try:
            failed(code, *args, env=kb, says=says)
        except AssertionError as exc:
            wrong.append(str(exc).splitlines()[0])
    assert not wrong, f"{len(wrong)} of {len(FAILURES)}:\n" + "\n".join(wrong)


def test_restore_over_a_knowledge_base_says_force(kb: dict[str, str], stocked: dict[str, Any]) -> None:
    stderr = failed(1, "restore", str(stocked["backup"]), env=kb, says=("not empty", "--force"))
    assert len(stderr.strip().splitlines()) <= 3, stderr  # a message, not 25 lines


def test_export_into_a_non_empty_directory(kb: dict[str, str], stocked: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    failed(1, "export", "Kitchen", str(tmp_path), env=kb, says=("not empty",))


def test_export_keeps_the_folder_layout_not_the_absolute_path(
    kb: dict[str, str], stocked: dict[str, Any], tmp_path: Path
) -> None:
    target = tmp_path / "out"
    archivist("export", "Kitchen", str(target), env=kb)
    written = sorted(str(p.relative_to(target)) for p in target.rglob("*.md"))
    assert written == ["coffee.md", "tea.md"], written


def test_doctor_without_a_database(tmp_path: Path) -> None:
    env = cli_env(DATABASE_URL="postgresql://nobody@127.0.0.1:9/none")
    done = run("doctor", env=env)
    assert done.returncode == 1 and "not answering" in done.stdout


def test_a_crawl_of_a_missing_page_fails_names_it_and_leaves_no_source(kb: dict[str, str], site: FixtureSite) -> None:
    url = site.url_for("/missing")
    stderr = failed(1, "crawl", url, "--single", "--title", "Gone site", env=kb, says=(url, "HTTP 404"))
    assert "archivist jobs" in stderr
    assert all(s["title"] != "Gone site" for s in json.loads(run("sources", "--json", env=kb).stdout))
    job = json.loads(run("jobs", "--json", env=kb).stdout)[0]
    assert job["status"] == "failed" and job["source_id"] is None and "recent_errors" not in job
    shown = run("jobs", job["id"], env=kb)
    assert shown.returncode == 0 and f"failed: {url}: HTTP 404" in shown.stdout, shown.stdout
    assert "Gone site" in shown.stdout  # the warning saying its empty source was removed
    detail = json.loads(run("jobs", job["id"], "--json", env=kb).stdout)
    assert detail["recent_errors"][0]["url"] == url


def test_a_crawl_that_stores_pages_exits_0_and_names_its_failed_pages(kb: dict[str, str], site: FixtureSite) -> None:
    crawl = ("crawl", site.url_for("/"), "--max-depth", "1", "--max-pages", "8", "--title", "Fixture")
    done = run(*crawl, env=kb, process=True)  # the crawl command's real process
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"failed: {site.url_for('/missing')}: HTTP 404" in done.stderr


def test_serve_on_a_taken_port_fails_before_the_ready_line(kb: dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        stderr = failed(1, "serve", "--http", "--port", port, env=kb, says=(f"port {port}", "--port"), process=True)
    assert "Archivist console" not in stderr


def test_completion_into_a_closed_pipe_ends_quietly() -> None:
    """`completion bash | head`: the reader may be gone before the script is written (`true` always is)."""
    for reader in ("head -1", "true"):
        command = f"'{sys.executable}' -c 'import cli; cli.main()' completion bash | {reader}"
        done = subprocess.run(["bash", "-c", command], cwd=ROOT, env=cli_env(), capture_output=True, text=True)
        assert done.stderr == "", f"| {reader}: {done.stderr}"


def test_search_of_an_empty_knowledge_base_says_how_to_add(tmp_path: Path, started_data_dir: Path) -> None:
    # an initialized, empty data directory (the first start of one is tests/cli/test_cli.py's)
    data_dir = copy_data_dir(started_data_dir, tmp_path / "kb")
    done = run("--data-dir", str(data_dir), "search", "anything", env=cli_env(), process=True)
    assert done.returncode == 0
    assert "knowledge base is empty" in done.stdout and "archivist ingest" in done.stdout


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("case", ["refused", "unknown host", "no such database"])
def test_a_wrong_database_url_names_the_setting_and_the_address(database_url: str, case: str) -> None:
    """Not "retry in a few seconds": the setting, the address tried, and what to check."""
    parts = urlsplit(database_url)
    port = _free_port()
    urls = {
        "refused": (f"postgresql://u:p@127.0.0.1:{port}/kb", f"127.0.0.1:{port}"),
        "unknown host": ("postgresql://u:p@db.invalid:5433/kb", "db.invalid:5433"),
        "no such database": (urlunsplit(parts._replace(path=f"/no_such_db_{uuid.uuid4().hex[:6]}")), "does not exist"),
    }
    url, named = urls[case]
    done = run("search", "hello", env=cli_env(DATABASE_URL=url))
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "DATABASE_URL" in said and named in said and "retry" not in said.lower(), said
    assert "u:p@" not in said, said  # never the password
