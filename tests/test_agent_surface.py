"""What agents see (issue 21): unknown arguments refused, results that lead back to their text, the
tools-spec's search result, search controls and write replies with ids; through a real MCP client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.app import Runtime
from tests.mcp_helpers import client_in_own_task, err, ok


@pytest_asyncio.fixture(scope="module")
async def client(settings: Any, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as c:
        yield c


# ---------- point 10: unknown arguments are refused ----------

CALLS = [
    ("search_knowledge_base", {"query": "otters", "sourceId": "x"}, "sourceId", "source_id"),
    ("search_knowledge_base", {"query": "otters", "match_cont": 3}, "match_cont", "match_count"),
    ("manage_document", {"action": "list", "per_pgae": 5}, "per_pgae", "per_page"),
    ("manage_document", {"action": "get", "documentId": "x"}, "documentId", "document_id"),
    ("manage_document", {"action": "create", "content": "x", "titel": "y"}, "titel", "title"),
    ("manage_document", {"action": "update", "document_id": "x", "contents": "y"}, "contents", "content"),
    ("manage_document", {"action": "delete", "document_id": "x", "force": True}, "force", None),
    ("manage_source", {"action": "create", "title": "x", "descripton": "y"}, "descripton", "description"),
    ("manage_source", {"action": "get", "source-id": "x"}, "source-id", "source_id"),
    ("manage_source", {"action": "list", "pages": 2}, "pages", "page"),
    ("manage_source", {"action": "update", "source_id": "x", "Title": "y"}, "Title", "title"),
    ("manage_source", {"action": "delete", "source_id": "x", "cascade": True}, "cascade", None),
    ("crawl_website", {"action": "start", "url": "http://127.0.0.1/", "max_page": 3}, "max_page", "max_pages"),
    ("crawl_website", {"action": "status", "jobId": "x"}, "jobId", "job_id"),
    ("crawl_website", {"action": "list", "state": "running"}, "state", None),
    ("crawl_website", {"action": "cancel", "job_id": "x", "wait": 1}, "wait", "wait_seconds"),
    ("crawl_website", {"action": "recrawl", "source_id": "x", "depth": 2}, "depth", None),
    ("crawl_website", {"action": "sync", "folderPath": "/tmp"}, "folderPath", "folder_path"),
]


@pytest.mark.parametrize(("tool", "arguments", "unknown", "meant"), CALLS)
async def test_unknown_argument_is_refused_naming_the_closest(
    client: Client, tool: str, arguments: dict[str, Any], unknown: str, meant: str | None
) -> None:
    payload = await err(client, tool, "INVALID_ARGUMENT", **arguments)
    assert f"`{unknown}`" in payload["error"], payload
    if meant is not None:
        assert f"did you mean `{meant}`?" in payload["error"], payload
    assert "takes:" in payload["suggestion"]


async def test_unknown_argument_refused_before_anything_happens(client: Client) -> None:
    """A create with a misspelt argument stores nothing."""
    await err(client, "manage_document", "INVALID_ARGUMENT", action="create", title="Refused", content="x", metdata={})
    listed = await ok(client, "manage_source", action="list", title="Refused")
    assert listed["total_count"] == 0
