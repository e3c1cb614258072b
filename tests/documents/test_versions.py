"""Versioned documentation: version resolution, versioned search through MCP, the "not available" reply,
listing by title, migration 007 on top of 006's identity index, and 023 making it per namespace."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.app import Archivist, Runtime
from services.core.database import migration_file
from services.core.errors import InvalidArgument
from services.sources.versions import pick
from tests.support.mcp_helpers import client_in_own_task, err, ok

LABELS = ["1.2.0", "2.1.0", "2.3.1", None]
DOCS = {
    "1.2.0": "In fixturelib 1.2 the connect function takes a host name and a port number.",
    "2.1.0": "In fixturelib 2.1 the connect function takes a single URL and a timeout in seconds.",
    "2.3.1": "In fixturelib 2.3 the connect function takes a URL, a timeout and a retry policy.",
}


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (None, "2.3.1"),
        ("latest", "2.3.1"),
        ("2.x", "2.3.1"),
        ("2.*", "2.3.1"),
        ("2.1.x", "2.1.0"),
        (">=2.1,<2.3", "2.1.0"),
        ("~=2.1", "2.3.1"),
        ("<2", "1.2.0"),
        ("1.2", "1.2.0"),
        ("v2.1.0", "2.1.0"),
        ("2.1.0", "2.1.0"),
        ("3.x", False),
        ("2.2", False),
        (">=3", False),
    ],
)
def test_pick(requested: str | None, expected: str | bool) -> None:
    assert pick(LABELS, requested) == expected


def test_pick_bad_range() -> None:
    with pytest.raises(InvalidArgument):
        pick(LABELS, ">=not-a-version")


async def test_migration_007_extends_the_identity_index(app: Archivist) -> None:
    """006 (another branch) makes (title, url) unique; 007 re-applied on top must add the version."""
    async with app.db.pool.acquire() as conn:
        had_index = await conn.fetchval("SELECT count(*) FROM pg_indexes WHERE indexname = 'sources_identity_uq'")
        await conn.execute("DROP INDEX IF EXISTS sources_identity_uq")
        await conn.execute("CREATE UNIQUE INDEX sources_identity_uq ON sources (lower(title), coalesce(url, ''))")
        sql = migration_file("007").read_text().format(embedding_dim=0, fts_config="english")
        await conn.execute(sql)
        definition = await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = 'sources_identity_uq'")
        assert "version" in definition
        await conn.execute("INSERT INTO sources (title, version) VALUES ('idx-lib', '1.0'), ('IDX-lib', '2.0')")
        with pytest.raises(asyncpg.UniqueViolationError):
            await conn.execute("INSERT INTO sources (title, version) VALUES ('idx-lib', '1.0')")
        await conn.execute("DELETE FROM sources WHERE lower(title) = 'idx-lib'")
        if not had_index:
            await conn.execute("DROP INDEX sources_identity_uq")


async def test_migration_023_makes_the_identity_unique_per_namespace(app: Archivist) -> None:
    """Sources from before 023 stay in the owner's namespace '' (unique as before); one identity may exist
    once per namespace, and the global index is gone."""
    async with app.db.pool.acquire() as conn:
        async with conn.transaction():
            await conn.execute("DROP INDEX sources_namespace_identity_uq")
            await conn.execute("ALTER TABLE sources DROP COLUMN namespace")
            await conn.execute(
                "CREATE UNIQUE INDEX sources_identity_uq ON sources (lower(title), coalesce(url, ''), "
                "coalesce(version, ''))"
            )
            old = await conn.fetchval("INSERT INTO sources (title, version) VALUES ('ns-lib', '1.0') RETURNING id")
            await conn.execute(migration_file("023").read_text())
        assert await conn.fetchval("SELECT namespace FROM sources WHERE id = $1", old) == ""
        assert not await conn.fetchval("SELECT count(*) FROM pg_indexes WHERE indexname = 'sources_identity_uq'")
        await conn.execute("INSERT INTO sources (title, version, namespace) VALUES ('NS-lib', '1.0', 'team')")
        for namespace in ("", "team"):
            with pytest.raises(asyncpg.UniqueViolationError):
                await conn.execute(
                    "INSERT INTO sources (title, version, namespace) VALUES ('ns-LIB', '1.0', $1)", namespace
                )
        await conn.execute("DELETE FROM sources WHERE lower(title) = 'ns-lib'")
    await app.db.pool.expire_connections()  # statements prepared before the column was re-added


@pytest_asyncio.fixture(scope="module")
async def client(settings: Any, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as c:
        yield c


@pytest_asyncio.fixture(scope="module")
async def library(client: Client) -> dict[str, str]:
    ids = {}
    for version, text in DOCS.items():
        created = await ok(client, "manage_source", action="create", title="fixturelib", version=version)
        assert created["source"]["version"] == version
        ids[version] = created["source"]["id"]
        await ok(client, "manage_document", action="create", source_id=ids[version], title="connect()", content=text)
    await ok(client, "manage_source", action="create", title="otherlib", version="9.0")
    return ids


async def search(client: Client, **arguments: Any) -> dict[str, Any]:
    return await ok(client, "search_knowledge_base", query="what does connect take", match_count=5, **arguments)


async def test_versioned_search(client: Client, library: dict[str, str]) -> None:
    for requested, served in [("2.x", "2.3.1"), (">=2.1,<2.3", "2.1.0"), ("1.2", "1.2.0"), (None, "2.3.1")]:
        payload = await search(client, library="FixtureLib", version=requested)
        assert payload["version"] == served and payload["library"] == "fixturelib", payload
        assert payload["source_id"] == library[served]
        assert payload["results"] and {r["metadata"]["source_id"] for r in payload["results"]} == {library[served]}
        assert DOCS[served] in payload["results"][0]["text"]
    # version alone applies to the library of source_id
    payload = await search(client, source_id=library["2.3.1"], version="1.x")
    assert payload["version"] == "1.2.0" and payload["source_id"] == library["1.2.0"]


async def test_versioned_search_says_what_was_served(client: Client, library: dict[str, str]) -> None:
    """Each hit carries its version, the reply what was asked, and why another label was served (29.4)."""
    notes = {
        "2.x": "'2.x' is a range: its highest version here, 2.3.1, was searched.",
        "1.2": "'1.2' is version 1.2.0 here (the same version, written differently).",
        None: "No version asked for: the newest, 2.3.1, was searched.",
        "2.1.0": None,
    }
    for requested, note in notes.items():
        payload = await search(client, library="fixturelib", version=requested)
        assert payload["requested_version"] == requested and payload.get("version_note") == note, payload
        assert {r["version"] for r in payload["results"]} == {payload["version"]}
    across = await search(client, source_ids=list(library.values()))  # several versions in one list
    assert {r["version"] for r in across["results"]} == set(library) and "requested_version" not in across


async def test_version_not_available_lists_versions(client: Client, library: dict[str, str]) -> None:
    failed = await err(
        client, "search_knowledge_base", "NOT_FOUND", query="connect", library="fixturelib", version="3.x"
    )
    assert "Available versions: 2.3.1, 2.1.0, 1.2.0" in failed["error"], failed
    failed = await err(client, "search_knowledge_base", "NOT_FOUND", query="connect", library="nolib", version="1")
    assert "manage_source" in failed["suggestion"]
    await err(client, "search_knowledge_base", "INVALID_ARGUMENT", query="connect", version="1.0")
    await err(client, "search_knowledge_base", "INVALID_ARGUMENT", query="c", library="fixturelib", version=">=x")


async def test_list_filters_by_title_and_shows_versions(client: Client, library: dict[str, str]) -> None:
    listed = await ok(client, "manage_source", action="list", title="FIXTURE")
    assert listed["total_count"] == 3
    assert sorted(s["version"] for s in listed["sources"]) == ["1.2.0", "2.1.0", "2.3.1"]
    listed = await ok(client, "manage_source", action="list", title="lib")
    assert listed["total_count"] == 4
    updated = await ok(client, "manage_source", action="update", source_id=library["1.2.0"], version="1.2.1")
    assert updated["source"]["version"] == "1.2.1"
    payload = await search(client, library="fixturelib", version="1.2.1")
    assert payload["version"] == "1.2.1"
