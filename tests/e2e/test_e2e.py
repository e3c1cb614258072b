"""End to end: `archivist serve` in a subprocess, driven by the official MCP client over stdio and HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CreateMessageRequestParams, CreateMessageResult, TextContent

from tests.support.cli_process import run_in_process
from tests.support.corpus import DOCUMENTS, QUERIES
from tests.support.mcp_helpers import err, ok

ARCHIVIST = shutil.which("archivist", path=str(Path(sys.executable).parent)) or "archivist"


def server_env(database_url: str, files_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHIVIST_")}
    env.update(
        {
            "DATABASE_URL": database_url,
            "ARCHIVIST_ALLOWED_PATHS": str(files_dir),
            "ARCHIVIST_DATA_DIR": str(files_dir.parent / "e2e-data"),
            "ARCHIVIST_CRAWL_ALLOW_PRIVATE": "true",
            "ARCHIVIST_LOG_LEVEL": "WARNING",
            "HF_HUB_OFFLINE": "1",
        }
    )
    return env


def startup_floor(env: dict[str, str]) -> float:
    """Seconds this machine takes to start the interpreter and import the server: the part of a handshake
    that is not Archivist waiting for anything (about 1.6-2.9 s on a 2-core machine, by its load)."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "import cli, server"], env=env, check=True, capture_output=True)
    return time.monotonic() - started


async def test_stdio_end_to_end(database_url: str, files_dir: Path) -> None:
    env = server_env(database_url, files_dir)
    floor = startup_floor(env)
    params = StdioServerParameters(command=ARCHIVIST, args=["serve"], env=env)
    started = time.monotonic()
    async with Client(params) as client:
        listed = await client.list_tools()
        handshake = time.monotonic() - started
        # the handshake never waits for the models or the database: within a second of the bare start-up
        assert handshake < floor + 1.0, f"initialize + tools/list took {handshake:.2f}s (start-up {floor:.2f}s)"
        assert {t.name for t in listed.tools} >= {"search_knowledge_base", "manage_document", "manage_source"}

        source = await ok(client, "manage_source", action="create", title="E2E")
        sid = source["source"]["id"]
        for title, content in DOCUMENTS.items():
            await ok(client, "manage_document", action="create", source_id=sid, title=title, content=content)
        (files_dir / "e2e.md").write_text("# Volcanoes\n\nMagma rises through the crust and erupts as lava.")
        (files_dir / "e2e-dir").mkdir()
        (files_dir / "e2e-dir" / "one.txt").write_text("Penguins huddle to survive Antarctic winters.")
        (files_dir / "e2e-dir" / "two.md").write_text("# Tides\n\nThe moon's gravity raises ocean tides.")
        await ok(client, "manage_document", action="create", source_id=sid, file_path=str(files_dir / "e2e.md"))
        folder = await ok(
            client, "manage_document", action="create", source_id=sid, file_path=str(files_dir / "e2e-dir")
        )
        assert folder["files_ingested"] == 2

        for search_type in ("vector", "hybrid", "rerank"):
            for query, expected in QUERIES:
                found = await ok(client, "search_knowledge_base", query=query, source_id=sid, search_type=search_type)
                assert found["results"][0]["document_title"] == expected, (search_type, query)
        lava = await ok(client, "search_knowledge_base", query="molten rock eruption", source_id=sid)
        assert lava["results"][0]["document_title"] == "Volcanoes"
        penguins = await ok(client, "search_knowledge_base", query="penguins in winter", source_id=sid)
        assert "Penguins" in penguins["results"][0]["text"]

        packed = await ok(client, "search_knowledge_base", query="molten rock", source_id=sid, max_tokens=120)
        assert 0 < packed["tokens_used"] <= 120 and packed["passages"][0]["citation"]["document_title"] == "Volcanoes"
        unanswered = await ok(client, "search_knowledge_base", query="molten rock", source_id=sid, answer=True)
        assert unanswered["answer"] is None and unanswered["passages"] and unanswered["note"]
        listed_resources = await client.list_resources()
        assert 0 < len(listed_resources.resources) <= 20
        volcano = await client.read_resource(f"archivist://documents/{lava['results'][0]['document_id']}")
        assert "Magma rises" in volcano.contents[0].text
        spec_page = await ok(client, "manage_document", action="list", per_page=1000)
        assert spec_page["per_page"] <= 20

        long_doc = await ok(
            client, "manage_document", action="create", source_id=sid, title="Long", content="Rivers meander. " * 200
        )
        doc_id = long_doc["document"]["id"]
        window = await ok(client, "manage_document", action="get", document_id=doc_id, offset=1500)
        assert window["content"]["text"] == ("Rivers meander. " * 200)[1500:2500]

        paged = await ok(client, "manage_source", action="create", title="E2E paged")
        pid = paged["source"]["id"]
        for i in range(25):
            await ok(client, "manage_document", action="create", source_id=pid, content=f"Fact {i} about number {i}.")
        page1 = await ok(client, "manage_document", action="list", source_id=pid, per_page=20)
        page2 = await ok(client, "manage_document", action="list", source_id=pid, per_page=20, page=2)
        assert (page1["count"], page1["has_more"], page2["count"], page2["has_more"]) == (20, True, 5, False)

        await ok(client, "manage_document", action="update", document_id=doc_id, content="Deserts receive little rain.")
        new = await ok(client, "search_knowledge_base", query="dry desert rainfall", source_id=sid, match_count=3)
        assert new["results"][0]["document_id"] == doc_id
        old = await ok(client, "search_knowledge_base", query="rivers meander", source_id=sid, match_count=20)
        assert all("meander" not in r["text"] for r in old["results"])

        deleted = await ok(client, "manage_document", action="delete", document_id=doc_id)
        assert deleted["chunks_deleted"] == 1
        await err(client, "manage_document", "NOT_FOUND", action="get", document_id=doc_id)
        await err(client, "manage_source", "INVALID_ARGUMENT", action="nope")
        await err(client, "search_knowledge_base", "INVALID_ARGUMENT", query="x", match_count="many")
        await err(client, "manage_document", "PERMISSION_DENIED", action="create", source_id=sid, file_path="/etc")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def wait_for_port(port: int, proc: subprocess.Popen[Any], timeout: float = 30.0) -> None:
    """Until the server answers HTTP. One client for all the tries: building one (its TLS context) costs
    ~55 ms of CPU, and a client a try took half a core from the server starting up."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as http:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"server exited with {proc.returncode}")
            try:
                await http.get(f"http://127.0.0.1:{port}/mcp", timeout=0.5)
                return
            except httpx.HTTPError:
                await asyncio.sleep(0.1)
    pytest.fail("HTTP server did not start")


async def test_http_end_to_end(database_url: str, files_dir: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [ARCHIVIST, "serve", "--http", "--port", str(port)],
        env=server_env(database_url, files_dir),
        stdout=subprocess.DEVNULL,
    )
    try:
        await wait_for_port(port, proc)
        async with Client(f"http://127.0.0.1:{port}/mcp", sampling_callback=answer_from_first_passage) as client:
            listed = await client.list_tools()
            assert "search_knowledge_base" in {t.name for t in listed.tools}
            created = await ok(
                client, "manage_document", action="create", title="HTTP source", content=DOCUMENTS["Roman aqueducts"]
            )
            assert created["source_created"] is True
            found = await ok(
                client, "search_knowledge_base", query="Pont du Gard", source_id=created["source_id"], match_count=1
            )
            assert found["results"][0]["document_title"] == "HTTP source"  # title names source and document
            assert "Pont du Gard" in found["results"][0]["text"]
            await err(client, "manage_document", "NOT_FOUND", action="get", document_id=created["source_id"])
            answered = await ok(
                client, "search_knowledge_base", query="Pont du Gard", source_id=created["source_id"], answer=True
            )
            assert answered["answer"] == "From the passages: see [1]."
            assert answered["citations"][0]["document_id"] == created["document"]["id"]
            by_chunk = await ok(client, "manage_document", action="get", chunk_id=found["results"][0]["chunk_id"])
            assert by_chunk["document"]["id"] == created["document"]["id"]
            read = await client.read_resource(f"archivist://documents/{created['document']['id']}")
            assert "Pont du Gard" in read.contents[0].text
    finally:
        proc.terminate()
        proc.wait(timeout=15)


async def answer_from_first_passage(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
    assert "[1]" in params.messages[0].content.text
    return CreateMessageResult(
        role="assistant", content=TextContent(type="text", text="From the passages: see [1]."), model="test"
    )


def run_cli(args: list[str], env: dict[str, str], process: bool = True) -> subprocess.CompletedProcess[str]:
    """`archivist ARGS` from this checkout (the installed script may point at another one); with
    `process=False` through `cli.main` in this process (tests/support/cli_process.py: the same
    environment, ~2 s of CPU less), for a sync test's commands after its first real one."""
    if not process:
        return run_in_process(args, env)
    command = [sys.executable, "-c", "import cli; cli.main()", *args]
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_config_prints_working_client_entries(database_url: str, files_dir: Path) -> None:
    import json

    env = server_env(database_url, files_dir)
    for client in ("claude-code", "claude-desktop"):
        done = run_cli(["config", client], env, process=client == "claude-code")
        assert done.returncode == 0, done.stderr
        entry = json.loads(done.stdout)["mcpServers"]["archivist"]
        assert Path(entry["command"]).is_absolute() and os.access(entry["command"], os.X_OK)
        assert entry["args"] == ["serve"]
        assert entry["env"]["DATABASE_URL"] == database_url
        assert entry["env"]["ARCHIVIST_ALLOWED_PATHS"] == str(files_dir)
    assert (
        json.loads(run_cli(["config", "claude-code"], env, process=False).stdout)["mcpServers"]["archivist"]["type"]
        == "stdio"
    )


def test_cli_ingest_search_sources(database_url: str, files_dir: Path) -> None:
    env = server_env(database_url, files_dir)
    notes = files_dir / "cli-notes"
    notes.mkdir()
    (notes / "owls.md").write_text("# Owls\n\nOwls hunt at night using silent flight and keen hearing.")
    (notes / "ferns.txt").write_text("Ferns reproduce with spores instead of seeds.")
    ingested = run_cli(["ingest", str(notes), "--source", "CLI notes"], env)
    assert ingested.returncode == 0, ingested.stderr
    assert "2 documents" in ingested.stdout
    found = run_cli(["search", "nocturnal birds hunting", "--type", "vector", "-k", "1"], env, process=False)
    assert found.returncode == 0, found.stderr
    assert "Owls" in found.stdout.splitlines()[0]
    listed = run_cli(["sources"], env, process=False)
    assert "CLI notes" in listed.stdout
    counts = {
        s["title"]: s["documents_count"] for s in json.loads(run_cli(["sources", "--json"], env, process=False).stdout)
    }
    assert counts["CLI notes"] == 2
    (notes / ".env").write_text("SECRET=1")
    refused = run_cli(["ingest", str(notes / ".env"), "--source", "CLI notes"], env, process=False)
    assert refused.returncode != 0 and ".env" in refused.stderr  # hidden files stay refused, even locally


def test_cli_crawl_and_jobs(database_url: str, files_dir: Path) -> None:
    from tests.support.fixture_site import FixtureSite

    env = {**server_env(database_url, files_dir), "ARCHIVIST_CRAWL_DELAY_SECONDS": "0"}
    with FixtureSite() as site:
        crawled = run_cli(["crawl", site.url + "/", "--max-pages", "3", "--title", "CLI crawl"], env)
        assert crawled.returncode == 0, crawled.stderr
        assert "completed" in crawled.stdout and "3 pages" in crawled.stdout
    jobs = run_cli(["jobs"], env, process=False)
    assert "completed" in jobs.stdout and site.url in jobs.stdout
