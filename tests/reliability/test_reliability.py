"""Issue 10 (fast part): database faults answer UNAVAILABLE and the pool heals, hostile text is cleaned,
find-or-create never duplicates a source, migration 006 merges existing duplicates."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.app import Archivist, Runtime
from services.core.database import Database, migration_file
from services.core.errors import Conflict, service_error_from
from tests.conftest import make_settings
from tests.support.mcp_helpers import call, client_in_own_task, err, ok


@pytest_asyncio.fixture(scope="module")
async def client(settings: Any, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as c:
        yield c


@pytest.mark.usefixtures("owner")
async def test_concurrent_find_or_create_makes_one_source(app: Archivist) -> None:
    results = await asyncio.gather(*(app.sources.get_or_create("Shared notes") for _ in range(12)))
    assert len({s.id for s, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    resolved = await asyncio.gather(*(app.documents.resolve_source(None, "shared NOTES") for _ in range(12)))
    assert {sid for sid, _ in resolved} == {results[0][0].id}


async def test_concurrent_creates_through_the_tool_share_one_source(client: Client, app: Archivist) -> None:
    replies = await asyncio.gather(
        *(
            call(client, "manage_document", action="create", title="Swarm notes", content=f"Note {i}.")
            for i in range(12)
        )
    )
    assert all(r["success"] for r in replies), replies
    assert len({r["document"]["source_id"] for r in replies}) == 1
    count = await app.db.pool.fetchval("SELECT count(*) FROM sources WHERE lower(title) = 'swarm notes'")
    assert count == 1


async def test_explicit_create_of_an_existing_title_conflicts(client: Client) -> None:
    first = await ok(client, "manage_source", action="create", title="Handbook")
    dupe = await err(client, "manage_source", "CONFLICT", action="create", title="handbook")
    assert first["source"]["id"] in dupe["suggestion"]
    await ok(client, "manage_source", action="create", title="Handbook", version="2.0")
    await ok(client, "manage_source", action="create", title="Handbook", url="https://example.org/hb")
    await err(client, "manage_source", "CONFLICT", action="create", title="Handbook", version="2.0")


async def test_nul_and_surrogates_are_removed_from_every_text_input(client: Client, app: Archivist) -> None:
    reply = await ok(client, "search_knowledge_base", query="nul\x00 query")
    assert reply["query"] == "nul query" or "\x00" not in str(reply)
    created = await ok(
        client,
        "manage_document",
        action="create",
        title="Ti\x00tle",
        content="Body with a NUL\x00 byte and a lone \ud800 surrogate.",
        url="https://example.org/a\x00b",
        metadata={"k\x00ey": "va\x00lue", "nested": ["x\x00"]},
    )
    doc = created["document"]
    row = await app.db.pool.fetchrow("SELECT title, content, url, metadata FROM documents WHERE id = $1", doc["id"])
    assert row["title"] == "Title"
    assert "\x00" not in row["content"] and "NUL byte" in row["content"]
    assert row["url"] == "https://example.org/ab"
    assert row["metadata"]["key"] == "value" and row["metadata"]["nested"] == ["x"]
    source = await ok(client, "manage_source", action="create", title="Nul\x00 source", description="d\x00")
    assert source["source"]["title"] == "Nul source"


async def test_service_callers_get_invalid_argument_for_unstorable_text(app: Archivist) -> None:
    with pytest.raises(asyncpg.exceptions.CharacterNotInRepertoireError) as raised:
        await app.db.pool.fetchval("SELECT $1::text", "a\x00b")
    mapped = service_error_from(raised.value)
    assert mapped is not None and mapped.code == "INVALID_ARGUMENT"


async def test_lost_connections_are_unavailable_and_the_pool_heals(client: Client, app: Archivist) -> None:
    await ok(client, "search_knowledge_base", query="warm up")
    runtime_app = app  # a second Archivist on the same database: terminate every backend of it
    async with runtime_app.db.pool.acquire() as conn:
        pid = conn.get_server_pid()
        killer = await asyncpg.connect(app.settings.database_url)
        try:
            await killer.execute("SELECT pg_terminate_backend($1)", pid)
        finally:
            await killer.close()
        with pytest.raises(Exception) as raised:
            await conn.fetchval("SELECT 1")
    mapped = service_error_from(raised.value)
    assert mapped is not None and mapped.code == "UNAVAILABLE" and mapped.retryable, raised.value
    assert "retry" in mapped.suggestion.lower()
    # The pool threw that connection away: the next calls succeed without any restart.
    for _ in range(3):
        assert await app.db.pool.fetchval("SELECT 1") == 1


async def test_unreachable_database_is_unavailable(files_dir: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = Database(make_settings(f"postgresql://x@127.0.0.1:{port}/none", files_dir))
    with pytest.raises(Exception) as raised:
        await db.start("m", 3)
    mapped = service_error_from(raised.value)
    assert mapped is not None and mapped.code == "UNAVAILABLE" and mapped.retryable, raised.value


def test_disk_full_and_read_only_name_the_directory() -> None:
    full = service_error_from(OSError(28, "No space left on device", "/data/archivist"))
    assert full is not None and full.code == "UNAVAILABLE" and "/data/archivist" in full.suggestion
    read_only = service_error_from(OSError(30, "Read-only file system", "/data/archivist"))
    assert read_only is not None and "read-only" in read_only.message
    assert service_error_from(ValueError("bug")) is None
    assert service_error_from(FileNotFoundError(2, "missing", "/x")) is None


@pytest.mark.usefixtures("owner")
async def test_migration_006_merges_duplicates_without_losing_documents(app: Archivist) -> None:
    """006 on a database from before it (no identity index yet); 023 then makes the identity per namespace."""
    async with app.db.pool.acquire() as conn:
        await conn.execute("DROP INDEX sources_namespace_identity_uq")
        ids = [
            await conn.fetchval(
                "INSERT INTO sources (title, created_at) VALUES ($1, now() + $2 * interval '1s') RETURNING id", t, i
            )
            for i, t in enumerate(["Merged", "merged", "MERGED"])
        ]
    keeper, dupe1, dupe2 = ids
    docs = app.documents
    await docs.create_from_text(keeper, "Keeper page about otters.", "K", "https://e.org/same")
    await docs.create_from_text(dupe1, "Keeper page about otters.", "Same", "https://e.org/same")
    await docs.create_from_text(dupe1, "A different page about beavers.", "Diff", "https://e.org/diff")
    await docs.create_from_text(dupe2, "Another page about beavers, changed.", "Diff2", "https://e.org/diff")
    await docs.create_from_text(dupe2, "Only here: herons.", "Heron")
    async with app.db.pool.acquire() as conn:
        sql = migration_file("006").read_text().format(embedding_dim=0, fts_config="english")
        async with conn.transaction():
            await conn.execute(sql)
        rows = await conn.fetch("SELECT id FROM sources WHERE lower(title) = 'merged'")
        assert [r["id"] for r in rows] == [keeper]
        docs_after = await conn.fetch("SELECT title, url, chunk_count FROM documents WHERE source_id = $1", keeper)
        titles = sorted(r["title"] for r in docs_after)
        assert titles == ["Diff", "Diff2", "Heron", "K"]  # the identical copy ("Same") was dropped
        assert len({r["url"] for r in docs_after}) == 4
        orphans = await conn.fetchval(
            "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.source_id <> d.source_id"
        )
        assert orphans == 0
        assert await conn.fetchval("SELECT count(*) FROM pg_indexes WHERE indexname = 'sources_identity_uq'") == 1
        async with conn.transaction():
            await conn.execute(migration_file("023").read_text())
        indexes = await conn.fetch("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'sources_%identity_uq'")
        assert [r["indexname"] for r in indexes] == ["sources_namespace_identity_uq"]
    with pytest.raises(Conflict):
        await app.sources.create("merged")


async def test_health_report_names_database_models_worker_and_queue(app: Archivist) -> None:
    from services.health import report

    body = await report(app)
    assert body["ok"] is True and body["database"]["ok"] is True and body["database"]["embedded"] is False
    assert body["models"]["embedding_dim"] == app.embedder.dim
    assert body["queue"]["ok"] is True and "running_jobs" in body["worker"]
