"""Issue 39 item 7, the design documents' remaining asks, through a real MCP client: a whole document in
one `get` (max_chars up to 50,000) and in one resource read (or a read that says how to page), `list`
honouring `offset` (a client paging by offset must not loop), and `source_must_exist` on the writes that
name a source by title."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import pytest_asyncio
from mcp import Client

from server import build_server
from services.access.scope import Scope, use_scope
from services.app import Archivist, Runtime
from tests.support.mcp_helpers import client_in_own_task, err, ok


def long_text(name: str, size: int) -> str:
    sentence = f"The {name} page says one thing about {name} and then another. "
    return "# " + name + "\n\n" + (sentence * (size // len(sentence) + 1))[:size]


WHOLE = long_text("meadows", 10_701)  # the page the reader could not read whole
HUGE = long_text("steppes", 61_000)  # longer than one read can hold


@pytest_asyncio.fixture(scope="module")
async def client(settings: Any, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as connected:
        yield connected


@pytest_asyncio.fixture(scope="module")
async def documents(client: Client, app: Archivist) -> dict[str, str]:
    """The two long pages, stored on the same database without their vectors (left to a worker, none
    runs here): what these tests read back is the text, and embedding 72,000 characters was most of
    this file's time."""
    source = await ok(client, "manage_source", action="create", title="Seed asks: long pages")
    ids = {}
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        for name, text in (("whole", WHOLE), ("huge", HUGE)):
            stored = await app.documents.ingest(UUID(source["source"]["id"]), name, text, "markdown", embed=False)
            ids[name] = str(stored.document.id)
    return ids


async def test_get_reads_a_whole_document_and_says_how_to_continue(client: Client, documents: dict[str, str]) -> None:
    whole = await ok(client, "manage_document", action="get", document_id=documents["whole"], max_chars=50_000)
    assert whole["content"]["text"] == WHOLE and whole["content"]["next_offset"] is None
    assert "note" not in whole and "hint" not in whole
    default = await ok(client, "manage_document", action="get", document_id=documents["whole"])
    assert len(default["content"]["text"]) == 1000  # the default window stays 1,000
    first = await ok(client, "manage_document", action="get", document_id=documents["huge"], max_chars=80_000)
    assert first["content"]["text"] == HUGE[:50_000] and "capped at 50,000" in first["note"]
    assert first["content"]["next_offset"] == 50_000 and "offset=50000" in first["hint"]
    assert f"{len(HUGE) - 50_000:,} more characters" in first["hint"]
    rest = await ok(
        client, "manage_document", action="get", document_id=documents["huge"], offset=50_000, max_chars=50_000
    )
    assert first["content"]["text"] + rest["content"]["text"] == HUGE and rest["content"]["next_offset"] is None


async def test_a_resource_read_returns_the_whole_document_or_says_how_to_page(
    client: Client, documents: dict[str, str]
) -> None:
    (whole,) = (await client.read_resource(f"archivist://documents/{documents['whole']}")).contents
    assert whole.text == WHOLE and whole.meta.get("next_uri") is None
    (first,) = (await client.read_resource(f"archivist://documents/{documents['huge']}")).contents
    next_uri = f"archivist://documents/{documents['huge']}?offset=50000"
    assert first.meta["next_uri"] == next_uri and first.text.startswith(HUGE[:50_000])
    trailer = first.text[50_000:]
    assert next_uri in trailer and f"of {len(HUGE):,}" in trailer  # plain in the text, not only in _meta
    (rest,) = (await client.read_resource(next_uri)).contents
    assert rest.text == HUGE[50_000:] and rest.meta.get("next_uri") is None


async def test_list_honours_offset(client: Client) -> None:
    source = await ok(client, "manage_source", action="create", title="Seed asks: many notes")
    sid = source["source"]["id"]
    for i in range(12):
        await ok(client, "manage_document", action="create", source_id=sid, title=f"note {i:02}", content=f"Note {i}.")
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:  # a client paging by offset, as the did
        listed = await ok(client, "manage_document", action="list", source_id=sid, offset=offset, per_page=5)
        assert listed["offset"] == offset and listed["count"] <= 5
        seen += [d["title"] for d in listed["documents"]]
        offset = listed["next_offset"]
        assert len(seen) <= 12, "paging by offset looped"
    assert seen == [f"note {i:02}" for i in range(12)]
    middle = await ok(client, "manage_document", action="list", source_id=sid, offset=7, per_page=3)
    assert [d["title"] for d in middle["documents"]] == ["note 07", "note 08", "note 09"] and middle["has_more"]
    await err(client, "manage_document", "INVALID_ARGUMENT", action="list", source_id=sid, offset=5, page=2)
    await err(client, "manage_document", "INVALID_ARGUMENT", action="list", source_id=sid, offset="Intro")


async def test_source_must_exist_refuses_a_mistyped_title(client: Client) -> None:
    await ok(client, "manage_source", action="create", title="Seed asks: handbook")
    refused = await err(
        client,
        "manage_document",
        "NOT_FOUND",
        action="create",
        title="Seed asks: handbok",
        content="A note.",
        source_must_exist=True,
    )
    assert "Seed asks: handbok" in refused["error"]
    crawl = await err(
        client,
        "crawl_website",
        "NOT_FOUND",
        action="start",
        url="http://127.0.0.1:9/",
        title="Seed asks: handbok",
        source_must_exist=True,
    )
    assert "Seed asks: handbok" in crawl["error"]
    titles = [s["title"] for s in (await ok(client, "manage_source", action="list", title="handbok"))["sources"]]
    assert titles == []  # nothing was created
    stored = await ok(
        client,
        "manage_document",
        action="create",
        title="Seed asks: HANDBOOK",
        content="A note.",
        source_must_exist=True,
    )
    assert stored["source_created"] is False
