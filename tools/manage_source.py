"""MCP tool: manage_source."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations

from services.app import Archivist, Runtime
from tools.common import dispatch, page_fields, source_view


async def create_source(app: Archivist, args: dict[str, Any]) -> dict[str, Any]:
    source = await app.sources.create(
        args["title"],
        args["description"],
        args["url"],
        args["source_type"] or "upload",
        args["metadata"],
        version=args["version"],
    )
    return {"source": source_view(source), "message": f"Source '{source.title}' created."}


async def get_source(app: Archivist, args: dict[str, Any]) -> dict[str, Any]:
    source = await app.sources.get(args["source_id"])
    stats = await app.sources.stats(source.id)
    return {"source": {**source_view(source), **stats.model_dump()}}


async def list_sources(app: Archivist, args: dict[str, Any]) -> dict[str, Any]:
    page = await app.sources.list(args["page"], args["per_page"], title=args["title"])
    return page_fields(page, "sources", [source_view(s) for s in page.items])


async def update_source(app: Archivist, args: dict[str, Any]) -> dict[str, Any]:
    source = await app.sources.update(
        args["source_id"],
        args["title"],
        args["description"],
        args["url"],
        args["source_type"],
        args["metadata"],
        version=args["version"],
    )
    return {"source": source_view(source), "message": "Source updated."}


async def delete_source(app: Archivist, args: dict[str, Any]) -> dict[str, Any]:
    removed = await app.sources.delete(args["source_id"])
    return {
        **removed,
        "message": f"Deleted source with {removed['documents_deleted']} documents and "
        f"{removed['chunks_deleted']} chunks.",
    }


ACTIONS = {
    "create": create_source,
    "get": get_source,
    "list": list_sources,
    "update": update_source,
    "delete": delete_source,
}


def register(mcp: MCPServer, runtime: Runtime) -> None:
    @mcp.tool(
        annotations=ToolAnnotations(
            title="Manage sources",
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=False,
            open_world_hint=False,
        ),
        structured_output=False,
    )
    async def manage_source(
        action: str,
        source_id: str | None = None,
        title: str | None = None,
        description: str | None = None,
        url: str | None = None,
        source_type: str | None = None,
        metadata: dict[str, Any] | None = None,
        version: str | None = None,
        page: int = 1,
        per_page: int = 10,
    ) -> CallToolResult:
        """Manage sources (named collections of documents).

        Actions:
            create: title required; description, url, source_type ("upload" default, "crawl", "api"), metadata,
                version (one source per version of a title).
            get: source_id; includes documents_count, chunks_count, last_updated.
            list: page, per_page (max 20); newest first; title filter (contains).
            update: source_id + any of title, description, url, source_type, metadata (merged), version.
            delete: source_id; deletes its documents and chunks too (reports counts).
        """
        return await dispatch("manage_source", runtime, ACTIONS, action, dict(locals()))
