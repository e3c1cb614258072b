"""MCP tool: manage_source."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations

from services.app import Archivist, Runtime
from services.documents.changes import ChangeLog
from tools.arguments import ToolArguments, tool_function
from tools.common import dispatch, page_fields, source_view
from tools.schemas import SourceReply

NAME = "manage_source"
#: one line: in `tools/list` a line break costs two characters (`\n`), a space one
DESCRIPTION = (
    "create: title; description, url, source_type, metadata, version. get: source_id. list: page,"
    " per_page, title. update: source_id + fields. delete: source_id, with its documents. changes: since"
    " (ISO) or job_id."
)


class SourceArguments(ToolArguments):
    action: Literal["create", "get", "list", "update", "delete", "changes"]
    source_id: str | None = None
    title: str | None = None
    description: str | None = None
    url: str | None = None
    source_type: Literal["upload", "crawl", "api"] | None = None
    metadata: dict[str, Any] | None = None
    version: str | None = None
    page: int = 1
    per_page: int = 10
    since: str | None = None
    job_id: str | None = None


ARGUMENTS = SourceArguments


async def create_source(app: Archivist, args: SourceArguments) -> dict[str, Any]:
    source = await app.sources.create(
        args.title,
        args.description,
        args.url,
        args.source_type or "upload",
        args.metadata,
        version=args.version,
    )
    counts = {"documents_count": 0, "chunks_count": 0}
    return {"source": {**source_view(source), **counts}, "message": f"Source '{source.title}' created."}


async def get_source(app: Archivist, args: SourceArguments) -> dict[str, Any]:
    source = await app.sources.get(args.source_id)
    stats = await app.sources.stats(source.id)
    return {"source": {**source_view(source), **stats.model_dump(), **await app.sources.origin(source)}}


async def list_sources(app: Archivist, args: SourceArguments) -> dict[str, Any]:
    page = await app.sources.list(args.page, args.per_page, title=args.title)
    counts = await app.sources.counts([s.id for s in page.items])
    views = [{**source_view(s), **counts.get(s.id, {"documents_count": 0, "chunks_count": 0})} for s in page.items]
    return page_fields(page, "sources", views)


async def update_source(app: Archivist, args: SourceArguments) -> dict[str, Any]:
    source = await app.sources.update(
        args.source_id,
        args.title,
        args.description,
        args.url,
        args.source_type,
        args.metadata,
        version=args.version,
    )
    return {"source": source_view(source), "message": "Source updated."}


async def delete_source(app: Archivist, args: SourceArguments) -> dict[str, Any]:
    removed = await app.sources.delete(args.source_id)
    return {
        **removed,
        "message": f"Deleted source with {removed['documents_deleted']} documents and "
        f"{removed['chunks_deleted']} chunks.",
    }


async def source_changes(app: Archivist, args: SourceArguments) -> dict[str, Any]:
    """Documents added, updated (with the sections that changed) and deleted since a time or a job's start."""
    page, since, counts = await ChangeLog(app.db, app.sources).list(
        args.source_id, args.since, args.job_id, args.page, args.per_page
    )
    return {"since": since, **counts, **page_fields(page, "changes", page.items)}


ACTIONS = {
    "create": create_source,
    "get": get_source,
    "list": list_sources,
    "update": update_source,
    "delete": delete_source,
    "changes": source_changes,
}


def register(mcp: MCPServer, runtime: Runtime) -> None:
    async def manage_source(args: SourceArguments, ctx: Context) -> CallToolResult:
        return await dispatch(NAME, runtime, ACTIONS, args)

    mcp.add_tool(
        tool_function(NAME, SourceArguments, manage_source, Annotated[CallToolResult, SourceReply]),
        description=DESCRIPTION,
        annotations=ToolAnnotations(open_world_hint=False),  # its own tables only; destructive (the default)
    )
