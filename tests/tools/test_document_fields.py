"""What hits, documents and sources carry (issue 32, point 2), through a real MCP client.

* Documents in `get` and `list`: `mime_type`, `size_bytes`, `status` (`ready`, or `pending_embedding`
  while chunks wait for their vectors).
* An update says `old_chunk_count`; a single file's create says `filename`, `file_type`, `file_size`.
* `manage_source get` gives `sample_documents`: the first five titles, oldest first.
* A search hit carries `source_title` and the document's own metadata (cut) when asked for with
  `fields`, keeping the contract's three-key `metadata` exact; `fields` names are checked.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.app import Archivist, Runtime
from tests.support.mcp_helpers import client_in_own_task, err, ok


@pytest_asyncio.fixture(scope="module")
async def client(settings: Any, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as c:
        yield c


@pytest.mark.usefixtures("owner")
async def test_documents_say_type_size_and_status(client: Client, app: Archivist, files_dir: Path) -> None:
    path = files_dir / "tides.md"
    path.write_text("# Tides\n\nSpring tides follow the full moon — höher als Nippfluten.\n")
    created = await ok(client, "manage_document", action="create", title="Tide notes", file_path=str(path))
    assert (created["filename"], created["file_type"], created["file_size"]) == ("tides.md", "md", path.stat().st_size)
    doc_id, source_id = created["document"]["id"], created["source_id"]
    got = (await ok(client, "manage_document", action="get", document_id=doc_id))["document"]
    assert got["mime_type"] == "text/markdown" and got["status"] == "ready"
    assert got["size_bytes"] == got["content_length"] + 3  # "—" is 3 bytes in UTF-8, "ö" 2

    waiting = await app.documents.ingest(
        (await app.sources.get(source_id)).id, "Waiting", "Neap tides are small.", "text", embed=False
    )
    listed = await ok(client, "manage_document", action="list", source_id=source_id)
    status = {d["title"]: (d["status"], d["mime_type"]) for d in listed["documents"]}
    assert status == {"Tide notes": ("ready", "text/markdown"), "Waiting": ("pending_embedding", "text/plain")}
    await app.documents.backlog.drain([waiting.document.id])
    got = await ok(client, "manage_document", action="get", document_id=str(waiting.document.id))
    assert got["document"]["status"] == "ready"

    updated = await ok(client, "manage_document", action="update", document_id=doc_id, content="# Tides\n\nShort.")
    assert updated["old_chunk_count"] == got["document"]["chunks_count"] or updated["old_chunk_count"] >= 1
    assert updated["document"]["chunks_count"] == updated["document"]["chunks_created"]


async def test_source_get_samples_its_first_documents(client: Client) -> None:
    source = (await ok(client, "manage_source", action="create", title="Sampled"))["source"]
    for n in range(7):
        await ok(client, "manage_document", action="create", source_id=source["id"], title=f"Note {n}", content=f"n{n}")
    got = await ok(client, "manage_source", action="get", source_id=source["id"])
    assert got["source"]["sample_documents"] == [f"Note {n}" for n in range(5)]


async def test_hits_carry_source_title_and_metadata_on_request(client: Client) -> None:
    created = await ok(
        client,
        "manage_document",
        action="create",
        title="Keeper log",
        content="The keeper logged a northerly gale at dawn.",
        metadata={"author": "Ada", "long_notes": "x" * 2000},
    )
    plain = await ok(client, "search_knowledge_base", query="northerly gale", source_id=created["source_id"])
    hit = plain["results"][0]
    assert "source_title" not in hit and "document_metadata" not in hit
    asked = await ok(
        client,
        "search_knowledge_base",
        query="northerly gale",
        source_id=created["source_id"],
        fields=["source_title", "document_metadata"],
    )
    hit = asked["results"][0]
    assert hit["source_title"] == "Keeper log"
    assert isinstance(hit["document_metadata"], str) and len(hit["document_metadata"]) <= 1000  # cut
    assert '"author":"Ada"' in hit["document_metadata"]
    assert list(hit["metadata"]) == ["source_id", "chunk_index", "url"]
    every = await ok(client, "search_knowledge_base", query="gale", source_id=created["source_id"], fields=["all"])
    assert {"heading_path", "similarity", "chunk_ids", "uri", "source_title", "indexed_at"} <= set(every["results"][0])
    failed = await err(client, "search_knowledge_base", "INVALID_ARGUMENT", query="gale", fields=["colour"])
    assert "colour" in failed["error"] and "heading_path" in failed["suggestion"]
