"""The tool contract through the MCP Python SDK client, connected in-process to the server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.app import Runtime
from tests.support.corpus import DOCUMENTS, QUERIES
from tests.support.mcp_helpers import call, client_in_own_task, err, ok

ZERO_ID = "00000000-0000-0000-0000-000000000000"


@pytest_asyncio.fixture(scope="module")
async def client(settings: Any, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as c:
        yield c


@pytest_asyncio.fixture(scope="module")
async def corpus_source(client: Client) -> str:
    created = await ok(client, "manage_source", action="create", title="Topics", description="test corpus")
    source_id = created["source"]["id"]
    for title, content in DOCUMENTS.items():
        await ok(client, "manage_document", action="create", source_id=source_id, title=title, content=content)
    return source_id


async def test_tools_listed_with_annotations_and_short_descriptions(client: Client) -> None:
    listed = await client.list_tools()
    names = {t.name for t in listed.tools}
    assert {"search_knowledge_base", "manage_document", "manage_source", "crawl_website"} <= names
    total = len(json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]))
    assert total < 7_000, total
    for tool in listed.tools:
        assert tool.output_schema is not None and "    " not in tool.description
    for tool in listed.tools:
        assert tool.description
    by_name = {t.name: t for t in listed.tools}
    assert hint(by_name["search_knowledge_base"], "read_only_hint") is True
    assert hint(by_name["search_knowledge_base"], "open_world_hint") is True  # search_type=web
    assert hint(by_name["manage_source"], "open_world_hint") is False
    for name in ("manage_source", "manage_document", "crawl_website"):
        assert hint(by_name[name], "read_only_hint") is False and hint(by_name[name], "destructive_hint") is True


#: each tool hint's value when a tool leaves it out (the MCP spec; mcp.types.ToolAnnotations)
HINT_DEFAULTS = {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": False, "open_world_hint": True}


def hint(tool: Any, name: str) -> bool:
    """A tool's hint as a client reads it: its value, else the spec's default."""
    value = getattr(tool.annotations, name, None) if tool.annotations is not None else None
    return HINT_DEFAULTS[name] if value is None else bool(value)


async def test_search_each_strategy_ranks_right_document_first(client: Client, corpus_source: str) -> None:
    for search_type in ("vector", "hybrid", "rerank"):
        for query, expected in QUERIES:
            payload = await ok(
                client, "search_knowledge_base", query=query, source_id=corpus_source, search_type=search_type
            )
            assert payload["results"][0]["document_title"] == expected, (search_type, query)
            assert payload["search_type"] == search_type and payload["query"] == query
            assert payload["count"] == len(payload["results"])
            first = payload["results"][0]
            for key in ("chunk_id", "document_id", "text", "score", "match_type", "char_start", "char_end"):
                assert key in first and "truncated" in first
            assert list(first["metadata"]) == ["source_id", "chunk_index", "url"]


async def test_search_caps_match_count(client: Client, corpus_source: str) -> None:
    payload = await ok(client, "search_knowledge_base", query="water", match_count=100)
    assert payload["match_count_capped"] is True and "20" in payload["note"]
    assert payload["count"] <= 20


async def test_long_text_is_truncated_with_flag_and_hint(client: Client) -> None:
    created = await ok(client, "manage_source", action="create", title="Long texts")
    sid = created["source"]["id"]
    code = "\n".join(f"glacier_flow_{i} = compute_flow(ice, slope={i})" for i in range(30))
    paragraph = f"# Glaciers\n\nGlaciers flow slowly.\n\n```python\n{code}\n```\n"  # a fence kept whole
    long_title = "T" * 300
    doc = await ok(client, "manage_document", action="create", source_id=sid, content=paragraph, title=long_title)
    assert len(doc["document"]["title"]) <= 200 and doc["document"]["truncated"] is True
    payload = await ok(client, "search_knowledge_base", query="glaciers flow", source_id=sid)
    hit = payload["results"][0]
    assert len(hit["text"]) <= 1000 and len(hit["document_title"]) <= 200 and hit["truncated"] is True
    assert "chunk_id" in payload["hint"]
    index = hit["metadata"]["chunk_index"]
    full = await ok(client, "manage_document", action="get", document_id=hit["document_id"], chunk_index=index)
    assert len(full["chunk"]["text"]) > 1000
    by_id = await ok(client, "manage_document", action="get", chunk_id=hit["chunk_id"])
    assert by_id["chunk"]["text"] == full["chunk"]["text"] and by_id["document"]["id"] == hit["document_id"]


async def test_document_lifecycle(client: Client, files_dir: Path) -> None:
    created = await ok(client, "manage_document", action="create", title="Lifecycle", content="Otters hold hands.")
    assert created["source_created"] is True and created["status"] == "created"
    doc_id, source_id = created["document"]["id"], created["source_id"]
    same = await ok(client, "manage_document", action="create", title="Lifecycle", content="Otters hold hands.")
    assert same["status"] == "unchanged" and same["source_id"] == source_id and same["source_created"] is False

    (files_dir / "guide.md").write_text("# Guide\n\n" + "Lanterns glow at night. " * 100)
    (files_dir / "dir").mkdir(exist_ok=True)
    (files_dir / "dir" / "x.txt").write_text("Puffins nest on cliffs.")
    (files_dir / "dir" / "y.md").write_text("# Y\n\nNarwhals have tusks.")
    from_file = await ok(
        client, "manage_document", action="create", source_id=source_id, file_path=str(files_dir / "guide.md")
    )
    assert from_file["document"]["title"] == "Guide" and from_file["document"]["document_type"] == "markdown"
    from_dir = await ok(
        client, "manage_document", action="create", source_id=source_id, file_path=str(files_dir / "dir")
    )
    assert from_dir["files_ingested"] == 2 and from_dir["files_failed"] == 0

    got = await ok(client, "manage_document", action="get", document_id=from_file["document"]["id"], offset=0)
    assert len(got["content"]["text"]) == 1000 and got["content"]["next_offset"] == 1000
    rest = await ok(client, "manage_document", action="get", document_id=from_file["document"]["id"], offset=2000)
    assert rest["content"]["offset"] == 2000 and rest["content"]["next_offset"] is None

    updated = await ok(
        client, "manage_document", action="update", document_id=doc_id, content="Sea otters use rocks as tools."
    )
    assert updated["document"]["chunks_count"] == 1
    hits = await ok(client, "search_knowledge_base", query="otters rocks tools", source_id=source_id)
    assert hits["results"][0]["document_id"] == doc_id and "rocks" in hits["results"][0]["text"]
    assert all("hold hands" not in r["text"] for r in hits["results"])

    deleted = await ok(client, "manage_document", action="delete", document_id=doc_id)
    assert deleted["chunks_deleted"] == 1
    await err(client, "manage_document", "NOT_FOUND", action="get", document_id=doc_id)


async def test_list_pagination_through_tool(client: Client) -> None:
    created = await ok(client, "manage_source", action="create", title="Twenty-five")
    sid = created["source"]["id"]
    for i in range(25):
        await ok(client, "manage_document", action="create", source_id=sid, content=f"Note {i}: item {i * 13}.")
    first = await ok(client, "manage_document", action="list", source_id=sid, per_page=20)
    second = await ok(client, "manage_document", action="list", source_id=sid, per_page=20, page=2)
    assert (first["total_count"], first["count"], first["has_more"]) == (25, 20, True)
    assert (second["count"], second["has_more"]) == (5, False)
    assert "content" not in first["documents"][0]
    clamped = await ok(client, "manage_document", action="list", source_id=sid, per_page=1000)
    assert clamped["per_page"] <= 20 and "clamped" in clamped["note"]


async def test_source_lifecycle(client: Client) -> None:
    created = await ok(client, "manage_source", action="create", title="Lifecycle source", source_type="api")
    sid = created["source"]["id"]
    await ok(client, "manage_document", action="create", source_id=sid, content="Comets have icy nuclei.")
    got = await ok(client, "manage_source", action="get", source_id=sid)
    assert got["source"]["documents_count"] == 1 and got["source"]["chunks_count"] == 1
    assert got["source"]["last_updated"] is not None
    updated = await ok(client, "manage_source", action="update", source_id=sid, description="space")
    assert updated["source"]["description"] == "space" and updated["source"]["title"] == "Lifecycle source"
    listed = await ok(client, "manage_source", action="list", per_page=20)
    assert listed["total_count"] >= 1 and listed["count"] <= 20 and "has_more" in listed
    deleted = await ok(client, "manage_source", action="delete", source_id=sid)
    assert deleted["documents_deleted"] == 1 and deleted["chunks_deleted"] == 1
    await err(client, "manage_source", "NOT_FOUND", action="get", source_id=sid)


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("manage_source", {"action": "explode"}, "INVALID_ARGUMENT"),
        ("manage_source", {"action": "get"}, "INVALID_ARGUMENT"),
        ("manage_source", {"action": "get", "source_id": "not-a-uuid"}, "INVALID_ARGUMENT"),
        ("manage_source", {"action": "get", "source_id": ZERO_ID}, "NOT_FOUND"),
        ("manage_source", {"action": "create"}, "INVALID_ARGUMENT"),
        ("manage_source", {"action": "create", "title": "x", "source_type": "ftp"}, "INVALID_ARGUMENT"),
        ("manage_source", {"action": "list", "page": 0}, "INVALID_ARGUMENT"),
        ("manage_source", {"action": "list", "per_page": 0}, "INVALID_ARGUMENT"),
        ("manage_source", {"action": "list", "page": "two"}, "INVALID_ARGUMENT"),
        ("manage_document", {"action": "create", "source_id": ZERO_ID, "content": "x"}, "NOT_FOUND"),
        ("manage_document", {"action": "create", "title": "x"}, "INVALID_ARGUMENT"),
        ("manage_document", {"action": "create", "title": "x", "content": "   "}, "INVALID_ARGUMENT"),
        ("manage_document", {"action": "create", "title": "x", "file_path": "/etc/passwd"}, "PERMISSION_DENIED"),
        ("manage_document", {"action": "create", "title": "x", "url": "ftp://example.com/x"}, "INVALID_ARGUMENT"),
        ("manage_document", {"action": "get", "document_id": "12"}, "INVALID_ARGUMENT"),
        ("manage_document", {"action": "get", "document_id": ZERO_ID}, "NOT_FOUND"),
        ("manage_document", {"action": "update", "document_id": ZERO_ID, "title": "t"}, "NOT_FOUND"),
        ("manage_document", {"action": "delete"}, "INVALID_ARGUMENT"),
        ("manage_document", {"action": "create", "title": "x", "content": "y", "metadata": "nope"}, "INVALID_ARGUMENT"),
        ("search_knowledge_base", {"query": ""}, "INVALID_ARGUMENT"),
        ("search_knowledge_base", {"query": "x", "search_type": "magic"}, "INVALID_ARGUMENT"),
        ("search_knowledge_base", {"query": "x", "match_count": 0}, "INVALID_ARGUMENT"),
        ("search_knowledge_base", {"query": "x", "similarity_threshold": 2}, "INVALID_ARGUMENT"),
        ("search_knowledge_base", {"query": "x", "source_id": ZERO_ID}, "NOT_FOUND"),
        ("search_knowledge_base", {}, "INVALID_ARGUMENT"),
        ("no_such_tool", {}, "NOT_FOUND"),
    ],
)
async def test_error_paths(client: Client, tool: str, arguments: dict[str, Any], code: str) -> None:
    await err(client, tool, code, **arguments)


async def test_error_detail_beside_the_flat_fields(client: Client) -> None:
    """Issue 32.8: every error carries the chat module's nested `error_detail` {code, message, retryable}
    beside the contract's flat fields, which keep their names and values (a tool error, an argument the
    SDK refuses, an unknown tool: every path goes through tools/common.failure)."""
    for tool, arguments in (
        ("manage_source", {"action": "get", "source_id": ZERO_ID}),
        ("search_knowledge_base", {"query": "x", "match_count": "many"}),
        ("no_such_tool", {}),
    ):
        payload = await call(client, tool, **arguments)
        assert list(payload)[:5] == ["success", "error", "error_code", "retryable", "suggestion"], payload
        assert payload["error_detail"] == {
            "code": payload["error_code"],
            "message": payload["error"],
            "retryable": payload["retryable"],
        }


async def test_get_chunk_out_of_range_and_bad_offset(client: Client, corpus_source: str) -> None:
    listed = await ok(client, "manage_document", action="list", source_id=corpus_source)
    doc_id = listed["documents"][0]["id"]
    await err(client, "manage_document", "INVALID_ARGUMENT", action="get", document_id=doc_id, chunk_index=99)
    await err(client, "manage_document", "INVALID_ARGUMENT", action="get", document_id=doc_id, offset=-1)
    payload = await call(client, "manage_document", action="get", document_id=doc_id, offset=10**9)
    assert payload["error_code"] == "INVALID_ARGUMENT"
