"""Archivist uses the MCP SDK through its public API (issue 31, point 2): every private SDK attribute is
reached from one adapter module, and each tool's published schemas are derived from its typed models."""

from __future__ import annotations

import json
import re
from pathlib import Path

from mcp import Client

from server import build_server
from services.app import Runtime
from services.core.settings import Settings
from tools import crawl_website, manage_document, manage_source, search_knowledge_base
from tools.schemas import CrawlReply, DocumentReply, SearchReply, SourceReply, published

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = ROOT / "tools" / "sdk_adapter.py"
#: the SDK's private objects Archivist has needed (mcp 2.3): managers, the low-level server, its
#: handlers, the request context, a session's connection, the custom route list, a tool's metadata
PRIVATE = re.compile(
    r"\._(tool_manager|resource_manager|prompt_manager|lowlevel_server|custom_starlette_routes|request_context"
    r"|connection|handle_[a-z_]+)\b|\bfn_metadata\b|[\"']_(request_context|lowlevel_server|tool_manager)[\"']"
)


def test_private_sdk_access_only_in_the_adapter() -> None:
    found = []
    for folder in ("tools", "access", "web", "commands"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ADAPTER:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if PRIVATE.search(line.split("#")[0]):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    for path in (ROOT / "server.py", ROOT / "cli.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if PRIVATE.search(line.split("#")[0]):
                found.append(f"{path.name}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


async def test_published_schemas_come_from_the_models() -> None:
    settings = Settings(_env_file=None, database_url="postgresql://x@127.0.0.1:1/x", run_worker=False)
    server = build_server(settings, runtime=Runtime(settings, embedder=None), run_worker=False)
    replies = {
        search_knowledge_base: SearchReply,
        manage_document: DocumentReply,
        manage_source: SourceReply,
        crawl_website: CrawlReply,
    }
    async with Client(server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    for module, reply in replies.items():
        tool = listed[module.NAME]
        assert tool.input_schema == module.ARGUMENTS.input_schema()
        derived = published(reply.model_json_schema())  # the views named as published (tools/schemas.py)
        assert json.dumps(tool.output_schema, sort_keys=True) == json.dumps(derived, sort_keys=True)
        assert list(tool.input_schema["properties"]) == module.ARGUMENTS.names()
