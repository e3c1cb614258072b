"""MCP resources: documents, sources and jobs (archivist://documents/{id}, archivist://sources/{id},
archivist://jobs/{id}).

A document resource is its whole content when it fits MAX_WINDOW (50,000 characters), else paged
like manage_document get from `offset`: the next page's URI is in `_meta.next_uri` (with the window's
injection flags and what was withheld: services/flags/reading.py) and, so a client that shows only the
text is told too, in an HTML comment closing the text; a source resource is its JSON description; a job
resource is what crawl_website(action="status") returns (subscribe to follow it: tools/subscriptions.py).
`resources/list` pages through the usage guide's SKILL.md (tools/skills.py), then sources, then documents,
20 per page.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.types import ListResourcesResult, PaginatedRequestParams, Resource

from services.app import Runtime
from services.core.errors import InvalidArgument, NotFound, ServiceError
from services.core.validation import MAX_PER_PAGE
from services.documents.reading import MAX_WINDOW, ReadingService
from services.flags.reading import ReadingPolicy
from tools import sdk_adapter
from tools.common import document_uri, source_uri, source_view, to_json
from tools.skills import skill_listing

# Where the last document window read in this task sits (offset, next_offset, total_length, next_uri).
LAST_WINDOW: ContextVar[dict[str, Any] | None] = ContextVar("archivist_last_window", default=None)


def service_error(exc: ServiceError) -> ResourceError:
    kind = ResourceNotFoundError if isinstance(exc, NotFound | InvalidArgument) else ResourceError
    return kind(f"{exc.message} {exc.suggestion}".strip())


def with_window_meta(contents: Iterable[ReadResourceContents]) -> list[ReadResourceContents]:
    """Attach the window's position (and the next page's URI) to a document read as `_meta`."""
    window = LAST_WINDOW.get()
    LAST_WINDOW.set(None)
    items = list(contents)
    if window is None:
        return items
    return [replace(item, meta={**(item.meta or {}), **window}) for item in items]


def register(mcp: MCPServer, runtime: Runtime) -> None:
    @mcp.resource(
        "archivist://documents/{document_id}{?offset}",
        name="document",
        description="A document's content: whole up to 50,000 characters, else paged (the text names the next URI).",
        mime_type="text/markdown",
    )
    async def read_document(document_id: str, offset: int = 0) -> str:
        try:
            app = await runtime.get()
            document = await app.documents.get(document_id)
            window = (await ReadingService(app.db).window(document.id, offset, MAX_WINDOW, by_section=False))["content"]
            window = await ReadingPolicy(app.db).window_view(document.id, window)  # flags; flagged text withheld
        except ServiceError as exc:
            raise service_error(exc) from None
        following = window["next_offset"]
        next_uri = f"{document_uri(document.id)}?offset={following}" if following is not None else None
        LAST_WINDOW.set(
            {
                "offset": window["offset"],
                "next_offset": following,
                "total_length": window["total_length"],
                "heading_path": window["heading_path"],
                "next_uri": next_uri,
                **{k: window[k] for k in ("flags", "withheld", "withheld_note", "flags_note") if k in window},
            }
        )
        text: str = window["text"]
        if next_uri is None:
            return text
        return text + read_on_note(window["offset"], following, window["total_length"], next_uri)

    @mcp.resource(
        "archivist://sources/{source_id}",
        name="source",
        description="A source (collection of documents) with its counts, as JSON.",
        mime_type="application/json",
    )
    async def read_source(source_id: str) -> str:
        try:
            app = await runtime.get()
            source = await app.sources.get(source_id)
            stats = await app.sources.stats(source.id)
        except ServiceError as exc:
            raise service_error(exc) from None
        return to_json({**source_view(source), **stats.model_dump()})

    @mcp.resource(
        "archivist://jobs/{job_id}",
        name="job",
        description="A crawl or sync job's status and counters, as JSON.",
        mime_type="application/json",
    )
    async def read_job(job_id: str) -> str:
        from tools.crawl_website import job_payload

        try:
            app = await runtime.get()
            job = await app.jobs.get(job_id)
        except ServiceError as exc:
            raise service_error(exc) from None
        return to_json(job_payload(job, []))

    async def list_page(cursor: str | None) -> ListResourcesResult:
        offset = parse_cursor(cursor)
        app = await runtime.get()
        fixed = [skill_listing()] if offset == 0 else []  # the usage guide (tools/skills.py) leads page one
        rows, more = await ReadingService(app.db).list_resources(offset, MAX_PER_PAGE - len(fixed))
        return ListResourcesResult(
            resources=fixed + [resource_entry(r) for r in rows],
            next_cursor=str(offset + len(rows)) if more else None,
        )

    async def list_resources(ctx: Any, params: PaginatedRequestParams) -> ListResourcesResult:
        return await list_page(params.cursor)

    sdk_adapter.serve(mcp, "resources/list", PaginatedRequestParams, list_resources)  # with its cursor


def read_on_note(start: int, end: int, total: int, next_uri: str) -> str:
    """Where a paged document read stands, closing its text: an HTML comment, unseen when the markdown
    is rendered, plain to an agent that reads only the text (and so never misses that more follows)."""
    return f"\n\n<!-- characters {start:,}-{end:,} of {total:,}; read on: {next_uri} -->\n"


def parse_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        value = int(cursor)
    except ValueError:
        raise ResourceError(f"Invalid cursor {cursor[:40]!r}: pass back next_cursor unchanged.") from None
    return max(value, 0)


def resource_entry(row: dict[str, Any]) -> Resource:
    if row["kind"] == "source":
        return Resource(
            uri=source_uri(row["id"]),
            name=str(row["title"])[:200],
            mime_type="application/json",
            description="Source",
        )
    return Resource(
        uri=document_uri(row["id"]),
        name=str(row["title"])[:200],
        mime_type="text/markdown",
        description=f"Document{' from ' + row['url'] if row['url'] else ''}"[:300],
    )
