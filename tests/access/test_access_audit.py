"""The audit log over real HTTP (`archivist serve --http` in a thread, the SDK client): exactly one row per call with
plausible latencies; a locked audit table slows no call and loses no row; and call timeouts leave no
half-written document."""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

import asyncpg
import httpx
import pytest
import pytest_asyncio

from server import build_server
from services.app import Runtime
from tests.access.test_access_http import authed
from tests.conftest import make_settings
from tests.e2e.test_e2e import ARCHIVIST, server_env
from tests.support.mcp_helpers import call, client_in_own_task, err
from tests.support.served import served_async


@pytest_asyncio.fixture(scope="module")
async def http_server(database_url: str, files_dir: Path) -> Any:
    env = {**server_env(database_url, files_dir), "ARCHIVIST_AUDIT_WRITE_TIMEOUT_SECONDS": "0.3"}
    async with served_async(env, "--no-worker") as base:
        yield int(base.rsplit(":", 1)[1])


async def audit_rows(app: Any, who: str, expected: int, settle: float = 1.5) -> list[Any]:
    """The caller's rows once `expected` are there (and no more arrive for `settle` seconds)."""
    rows: list[Any] = []
    for _ in range(300):
        rows = await app.db.pool.fetch("SELECT * FROM audit_log WHERE who = $1 ORDER BY id", who)
        if len(rows) >= expected:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(settle)
    return await app.db.pool.fetch("SELECT * FROM audit_log WHERE who = $1 ORDER BY id", who)


def script(source_id: str) -> list[tuple[str, dict[str, Any], str | None]]:
    """30 calls of every tool, a third of them failing in different ways: (tool, arguments, error_code)."""
    missing = str(uuid4())
    steps: list[tuple[str, dict[str, Any], str | None]] = [
        ("manage_document", {"action": "create", "source_id": source_id, "content": "Audit note on ferries."}, None),
        ("manage_document", {"action": "create", "source_id": source_id, "content": "x" * 500, "title": "Long"}, None),
        ("search_knowledge_base", {"query": "ferries"}, None),
        ("search_knowledge_base", {"query": "ferries", "match_count": 0}, "INVALID_ARGUMENT"),
        ("search_knowledge_base", {"query": "ferries", "profile": "ghost"}, "INVALID_ARGUMENT"),
        ("manage_source", {"action": "list"}, None),
        ("manage_source", {"action": "get", "source_id": source_id}, None),
        ("manage_source", {"action": "get", "source_id": missing}, "NOT_FOUND"),
        ("manage_document", {"action": "list", "source_id": source_id}, None),
        ("manage_document", {"action": "get", "document_id": missing}, "NOT_FOUND"),
        ("crawl_website", {"action": "list"}, None),
        ("crawl_website", {"action": "status", "job_id": missing}, "NOT_FOUND"),
        ("manage_source", {"action": "update", "source_id": source_id, "description": "audited"}, None),
        ("manage_source", {"action": "get", "source_id": "not-a-uuid"}, "INVALID_ARGUMENT"),
        ("search_knowledge_base", {"query": "audit note", "search_type": "vector"}, None),
    ]
    return (steps * 2)[:30]


@pytest.mark.usefixtures("owner")
async def test_thirty_calls_thirty_rows(app, http_server: int) -> None:
    source = await app.sources.create(title="Audited", source_type="api")
    _, secret = await app.tokens.create("auditor", [])
    walls: list[float] = []
    async with authed(f"http://127.0.0.1:{http_server}/mcp", secret) as c:
        await c.list_tools()
        for tool, arguments, code in script(str(source.id)):
            started = time.perf_counter()
            payload = await call(c, tool, **arguments)
            walls.append((time.perf_counter() - started) * 1000)
            assert payload.get("error_code") == code, (tool, arguments, payload)
    rows = await audit_rows(app, "auditor", 30)
    assert len(rows) == 30
    for row, wall, (tool, arguments, code) in zip(rows, walls, script(str(source.id)), strict=True):
        assert row["tool"] == tool and row["error_code"] == code
        assert row["action"] == arguments.get("action", "search")
        assert 0 < row["latency_ms"] < wall, (tool, row["latency_ms"], wall)
        assert row["response_bytes"] > 0
    long = next(r for r in rows if r["tool"] == "manage_document" and "Long" in str(r["arguments"]))
    assert "sha256" in str(long["arguments"]) and "x" * 300 not in str(long["arguments"])


async def timed_calls(c: Any, n: int) -> list[float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        assert (await call(c, "manage_source", action="list"))["success"]
        times.append((time.perf_counter() - started) * 1000)
    return times


async def test_locked_audit_table_slows_nothing_and_loses_nothing(app, database_url: str, http_server: int) -> None:
    _, secret = await app.tokens.create("locker", [])
    url = f"http://127.0.0.1:{http_server}/mcp"
    async with authed(url, secret) as c:
        await c.list_tools()
        await timed_calls(c, 3)  # warm up
        unlocked = await timed_calls(c, 15)
        blocker = await asyncpg.connect(database_url)
        try:
            locking = blocker.transaction()
            await locking.start()
            await blocker.execute("LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE")
            locked = await timed_calls(c, 15)
            await asyncio.sleep(1.0)  # the writer's attempts time out meanwhile
            await locking.rollback()
        finally:
            await blocker.close()
    # generous bound: a blocked audit write must not add its wait (0.3 s per attempt) to any call
    assert statistics.median(locked) < 3 * statistics.median(unlocked) + 50, (unlocked, locked)
    assert max(locked) < 1000, locked
    rows = await audit_rows(app, "locker", 33, settle=0.5)
    assert len(rows) == 33  # late, not lost
    async with httpx.AsyncClient() as http:
        bearer = {"Authorization": f"Bearer {secret}"}  # a token exists: details need one
        audit = (await http.get(f"http://127.0.0.1:{http_server}/healthz", headers=bearer)).json()["audit"]
    assert audit["late"] > 0 and audit["dropped"] == 0 and audit["queued"] == 0, audit


def big_text(words: int, seed: int) -> str:
    rng = random.Random(seed)
    vocab = [f"w{rng.randrange(5000)}" for _ in range(3000)]
    paragraphs = [" ".join(rng.choice(vocab) for _ in range(120)) + "." for _ in range(words // 120)]
    return "\n\n".join(paragraphs)


async def consistent(app: Any, title: str) -> int:
    """0 or 1 documents titled `title`, and when 1, chunk_count equals its real chunks; no orphans."""
    docs = await app.db.pool.fetch("SELECT id, chunk_count FROM documents WHERE title = $1", title)
    assert len(docs) <= 1
    for d in docs:
        real = await app.db.pool.fetchval("SELECT count(*) FROM chunks WHERE document_id = $1", d["id"])
        assert d["chunk_count"] == real and real > 0
    orphans = await app.db.pool.fetchval(
        "SELECT count(*) FROM chunks c LEFT JOIN documents d ON d.id = c.document_id WHERE d.id IS NULL"
    )
    assert orphans == 0
    return len(docs)


@pytest.mark.usefixtures("owner")
async def test_timeouts_leave_no_half_written_document(app, database_url: str, files_dir: Path, embedder) -> None:
    settings = make_settings(database_url, files_dir, call_timeout_seconds=0.05)
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    source = await app.sources.create(title="Timeouts", source_type="api")
    small = (await app.documents.create_from_text(source.id, "Small steady text.", title="Steady")).document
    timeouts = 0
    async with client_in_own_task(server) as c:
        runtime_app = await server.runtime.get()
        for i, limit in enumerate((0.05, 0.3, 1.0)):
            runtime_app.settings.call_timeout_seconds = limit
            title = f"Big {i}"
            reply = await call(
                c, "manage_document", action="create", source_id=str(source.id), title=title, content=big_text(1_500, i)
            )
            if not reply["success"]:
                assert reply["error_code"] == "TIMEOUT" and reply["retryable"] is True, reply
                timeouts += 1
            await consistent(app, title)
        runtime_app.settings.call_timeout_seconds = 0.05
        new_text = big_text(1_500, 9)
        e = await err(c, "manage_document", "TIMEOUT", action="update", document_id=str(small.id), content=new_text)
        assert e["retryable"] is True
    await asyncio.sleep(2)  # anything still running in a thread has had its chance to write
    assert timeouts >= 1
    after = await app.documents.get(small.id)
    # Wholly old, or wholly new: with two-phase indexing the new chunks may have been stored (and be
    # keyword-searchable) before the embeddings timed out; a retry of the same update is idempotent.
    old = after.chunk_count == small.chunk_count and after.content_length == small.content_length
    stored = await app.db.pool.fetchval("SELECT content FROM documents WHERE id = $1", small.id)
    assert old or stored.strip() == new_text.strip(), (after.chunk_count, after.content_length)
    await consistent(app, "Steady")
    for i in range(3):
        await consistent(app, f"Big {i}")


@pytest.mark.usefixtures("owner")
async def test_timeout_in_the_middle_of_the_write_rolls_back(app, database_url: str, files_dir: Path, embedder) -> None:
    """The chunk write blocks (another connection holds chunks in SHARE mode, so reads go on) after the
    document row is inserted in the same transaction: the TIMEOUT must roll the document back too."""
    settings = make_settings(database_url, files_dir, call_timeout_seconds=4.0)
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    source = await app.sources.create(title="Mid-write", source_type="api")
    kept = (await app.documents.create_from_text(source.id, "Original words on herons.", title="Kept")).document
    async with client_in_own_task(server) as c:
        await call(c, "manage_source", action="get", source_id=str(source.id))  # started
        blocker = await asyncpg.connect(database_url)
        try:
            locking = blocker.transaction()
            await locking.start()
            await blocker.execute("LOCK TABLE chunks IN SHARE MODE")
            created = await err(
                c,
                "manage_document",
                "TIMEOUT",
                action="create",
                source_id=str(source.id),
                title="Blocked",
                content="Herons stand still in shallow water, waiting for fish.",
            )
            updated = await err(
                c,
                "manage_document",
                "TIMEOUT",
                action="update",
                document_id=str(kept.id),
                content="Replacement words that must not land.",
            )
            assert created["retryable"] and updated["retryable"]
            assert await app.db.pool.fetchval("SELECT count(*) FROM documents WHERE title = 'Blocked'") == 0
            await locking.rollback()
        finally:
            await blocker.close()
    assert await consistent(app, "Blocked") == 0
    after = await app.documents.get(kept.id)
    assert after.content_length == kept.content_length and after.chunk_count == kept.chunk_count
    await consistent(app, "Kept")


async def test_a_stdio_client_that_closes_at_once_loses_no_call(database_url: str, files_dir: Path) -> None:
    """The SDK closes stdin, waits 2 s, then terminates the server: every call made just before is in the log."""
    from mcp import Client, StdioServerParameters

    env = server_env(database_url, files_dir)
    marker = f"stdio-close-{uuid4().hex[:8]}"
    async with Client(StdioServerParameters(command=ARCHIVIST, args=["serve"], env=env)) as client:
        for _ in range(3):
            reply = await call(client, "search_knowledge_base", query=marker, search_type="keyword")
            assert reply["success"], reply
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetchval(
            "SELECT count(*) FROM audit_log WHERE tool = 'search_knowledge_base' AND arguments->>'query' = $1", marker
        )
    finally:
        await conn.close()
    assert rows == 3, rows
