"""MCP tool: manage_document."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult

from models import Document, IngestResult
from services.access.paths import resolve_caller_path
from services.app import Archivist, Runtime
from services.core.errors import InvalidArgument
from services.core.validation import MAX_PER_PAGE, parse_uuid
from services.documents.reading import MAX_WINDOW, ReadingService, outline_page_view, parse_outline
from services.documents.specs import SpecIngestResult
from services.flags.reading import ReadingPolicy, chunk_view
from tools import code_files, code_symbols
from tools.app_ui import APP_META
from tools.arguments import ToolArguments, tool_function
from tools.common import TEXT_LIMIT, cut, dispatch, document_view, page_fields, page_number_field
from tools.schemas import DocumentReply

NAME = "manage_document"
#: one line: in `tools/list` a line break costs two characters (`\n`), a space one
DESCRIPTION = (
    "create: content, file_path (file or folder: recursive, extensions) or url; into source_id or a source"
    " by title. get: document_id, url (+source_id) or chunk_id; max_chars (max 50000) from offset (number"
    " or heading); chunk_index; graph=true: links. source_id+path (+line_start/line_end): a file's lines."
    " list: source_id (+path: a folder's files), page/offset. outline: document_id or source_id+path:"
    " symbols or headings. update: document_id + fields. delete: document_id."
)


class DocumentArguments(ToolArguments):
    action: Literal["create", "get", "list", "update", "delete", "outline"]
    document_id: str | None = None
    source_id: str | None = None
    content: str | None = None
    file_path: str | None = None
    title: str | None = None
    url: str | None = None
    metadata: dict[str, Any] | None = None
    page: int = 1
    per_page: int = 10
    offset: int | str | None = None
    max_chars: int | None = None
    chunk_index: int | None = None
    chunk_id: str | None = None
    extensions: list[str] | None = None
    recursive: bool = True
    order: str | None = None
    graph: bool | None = None
    source_must_exist: bool | None = None  # create: a title naming no source is NOT_FOUND (docs/tools.md)
    path: str | None = None
    line_start: int | None = None
    line_end: int | None = None


ARGUMENTS = DocumentArguments

DOC_HINT = "Use manage_document(action='list', source_id=...) to find document ids."
STATUS_MESSAGES = {
    "created": "Document ingested with {n} chunks.",
    "updated": "Document replaced with {n} chunks.",
    "unchanged": "Same content already stored in this source; nothing re-embedded.",
}


async def ingest_view(app: Archivist, result: IngestResult) -> dict[str, Any]:
    """A written document with its chunk ids (the first 20; `chunk_ids_cut` when it has more)."""
    chunk_ids, total = await ReadingService(app.db).chunk_ids(result.document.id)
    return {
        "document": {**document_view(result.document), "chunks_created": result.chunks_created},
        "chunk_ids": chunk_ids,
        **({"chunk_ids_cut": True} if total > len(chunk_ids) else {}),
        "status": result.status,
        "message": STATUS_MESSAGES[result.status].format(n=result.chunks_created),
    }


async def create_from_directory(
    app: Archivist, source_id: Any, directory: Path, args: DocumentArguments
) -> dict[str, Any]:
    passed_over: list[tuple[Path, str]] = []
    results, failures, skipped = await app.documents.create_from_directory(
        source_id,
        directory,
        args.extensions,
        args.metadata,
        recursive=args.recursive is not False,
        passed_over=passed_over,
    )
    counts = {status: sum(1 for _, r in results if r.status == status) for status in STATUS_MESSAGES}
    files = len({path for path, _ in results})  # a spec file yields one result per operation
    reasons: dict[str, int] = {}
    for _, reason in passed_over:
        reasons[reason] = reasons.get(reason, 0) + 1
    lists = (results, failures, passed_over)
    return {
        "directory": str(directory),
        "files_found": files + len(failures) + len(passed_over),
        "files_ingested": files,
        "files_failed": len(failures),
        "files_skipped": len(passed_over),
        "skipped_by_reason": reasons,
        "files_skipped_over_limit": skipped,
        **{f"documents_{k}": v for k, v in counts.items()},
        "chunks_created": sum(r.chunks_created for _, r in results),
        "document_ids": [r.document.id for _, r in results[:MAX_PER_PAGE]],
        "documents": [
            {"path": str(p), "id": r.document.id, "status": r.status, "chunks_created": r.chunks_created}
            for p, r in results[:MAX_PER_PAGE]
        ],
        "failures": [f.model_dump() for f in failures[:MAX_PER_PAGE]],
        "skipped": [{"path": str(p), "reason": reason} for p, reason in passed_over[:MAX_PER_PAGE]],
        "lists_cut": any(len(items) > MAX_PER_PAGE for items in lists),
        "message": f"Ingested {files} files ({len(failures)} failed). "
        "Use manage_document(action='list', source_id=...) to page through all documents.",
    }


async def create_document(app: Archivist, args: DocumentArguments) -> dict[str, Any]:
    given = [k for k, v in (("content", args.content), ("file_path", args.file_path)) if v]
    if len(given) > 1:
        raise InvalidArgument("Pass either content or file_path, not both.", "Send one per call.")
    if not given and not args.url:
        raise InvalidArgument(
            "create needs content, file_path (a file or a directory) or url.",
            "Pass content='...' to store text, file_path='docs/' to ingest files, or url='https://...'.",
        )
    # a path the caller may not read is refused before any source is created for it
    path = resolve_caller_path(args.file_path, app.settings.allowed_paths) if args.file_path else None
    docs = app.documents
    async with docs.source_for_write(args.source_id, args.title, bool(args.source_must_exist)) as (
        source_id,
        source_created,
    ):
        extra = {"source_id": source_id, "source_created": source_created}
        result: IngestResult | SpecIngestResult
        if args.content:
            result = await docs.create_from_text(source_id, args.content, args.title, args.url, args.metadata)
        elif path is not None:
            if path.is_dir():
                return {**await create_from_directory(app, source_id, path, args), **extra}
            result = await docs.create_from_file(source_id, path, args.title, args.url, args.metadata)
            extra.update(file_fields(path, result))
        else:
            assert args.url  # checked above: create needs content, file_path or url
            result = await docs.create_from_url(source_id, args.url, args.title, args.metadata)
    if isinstance(result, SpecIngestResult):  # an OpenAPI spec: one document per operation
        return {**result.summary(), **extra}
    return {**await ingest_view(app, result), **extra}


def file_fields(path: Path, result: Any) -> dict[str, Any]:
    """A single file's name, type (its extension) and size in bytes, as read."""
    documents = [result.document] if isinstance(result, IngestResult) else []
    size = documents[0].metadata.get("file_size") if documents else None
    return {
        "filename": path.name,
        "file_type": path.suffix.lstrip(".").lower() or "text",
        "file_size": size if isinstance(size, int) else path.stat().st_size,
    }


async def get_document(app: Archivist, args: DocumentArguments) -> dict[str, Any]:
    if args.path is not None or args.line_start is not None or args.line_end is not None:  # tools/code_files.py
        return await code_files.read_lines(app, args)
    reader = ReadingService(app.db)
    if args.chunk_id:
        return await get_chunk_by_id(app, reader, args.chunk_id, args.offset, args.max_chars)
    if args.document_id or not args.url:
        document = await app.documents.get(args.document_id)
    else:
        sid = (await app.sources.get(args.source_id)).id if args.source_id else None
        document = await reader.document_by_url(args.url, sid)
    payload: dict[str, Any] = {"document": document_view(document)}
    if args.graph:  # opt-in: the one-hop page graph, in the caller's scope
        payload["graph"] = await app.documents.graph(document.id)
    if args.chunk_index is not None:
        chunk = await app.documents.get_chunk(document.id, args.chunk_index)
        view = chunk_view(chunk.model_dump(exclude={"page_start", "page_end"}))  # the reading policy
        text, text_cut = cut(view["text"], MAX_WINDOW)
        pages = page_number_field(chunk.page_start, chunk.page_end)
        payload["chunk"] = {**view, "text": text, "truncated": text_cut, **pages}
        return payload
    payload.update(await reader.window(document.id, args.offset, args.max_chars, args.page))
    payload["content"] = await ReadingPolicy(app.db).window_view(document.id, payload["content"])
    following = payload["content"]["next_offset"]
    if following is not None:
        left = payload["content"]["total_length"] - following
        payload["hint"] = (
            f"{left:,} more characters: read on with offset={following} (max_chars up to {MAX_WINDOW:,}), "
            "or jump with offset='<heading>'."
        )
    links = await app.documents.links(document.id)
    if links is not None:
        payload["links"] = links
    return payload


async def get_chunk_by_id(
    app: Archivist, reader: ReadingService, chunk_id: str, offset: int | str | None, max_chars: int | None
) -> dict[str, Any]:
    """A chunk and the text around it (it holds the window of any result focused in the chunk); with
    `offset` (a result's char_start), the content opens there."""
    chunk = chunk_view(await reader.chunk_by_id(chunk_id))  # the reading policy
    document = await app.documents.get(chunk["document_id"])
    text, text_cut = cut(chunk["text"], MAX_WINDOW)
    if offset is None:
        window = await reader.chunk_window(chunk, TEXT_LIMIT)
    else:
        window = (await reader.window(document.id, offset, max_chars, by_section=False))["content"]
    pages = page_number_field(chunk.pop("page_start"), chunk.pop("page_end"))
    view = {**chunk, "text": text, "truncated": text_cut, **pages}
    window = await ReadingPolicy(app.db).window_view(document.id, window)  # the reading policy
    return {"document": document_view(document), "chunk": view, "content": window}


async def outline_document(app: Archivist, args: DocumentArguments) -> dict[str, Any]:
    """A code file's symbols in file order (tools/code_symbols.py); a prose document's headings."""
    if args.path is not None:
        if not args.source_id:
            raise InvalidArgument("path needs source_id.", "Pass source_id with path, or a document_id.")
        document = await app.documents.get(await app.symbols.document_at(app.sources, args.source_id, args.path))
    else:
        document = await app.documents.get(args.document_id)
    payload: dict[str, Any] = {"document": document_view(document)}
    symbols = await app.symbols.outline(document.id)
    if symbols is not None:
        payload["outline"] = code_symbols.outline_view(symbols, args.page)
        return payload
    content = await ReadingService(app.db).content(document.id)
    payload["outline"] = outline_page_view(parse_outline(content), args.page)
    return payload


async def list_documents(app: Archivist, args: DocumentArguments) -> dict[str, Any]:
    if args.path is not None:  # the files under a directory of a source
        return await code_files.list_files(app, args)
    page = await app.documents.list(args.source_id, args.page, args.per_page, args.order, start=args.offset)
    return page_fields(page, "documents", [document_view(d) for d in page.items])


async def update_document(app: Archivist, args: DocumentArguments) -> dict[str, Any]:
    if args.file_path:
        raise InvalidArgument(
            "update takes content, not file_path.", "Read the file and pass content=..., or create it anew."
        )
    before = await app.documents.get(args.document_id)
    result = await app.documents.update(args.document_id, args.title, args.url, args.metadata, args.content)
    view = await ingest_view(app, result)
    view["updated_fields"] = updated_fields(before, result.document)
    view["old_chunk_count"] = before.chunk_count
    view["message"] = (
        f"Document updated; re-chunked and re-embedded into {result.chunks_created} chunks."
        if result.chunks_created
        else "Document metadata updated."
    )
    return view


def updated_fields(before: Document, after: Document) -> list[str]:
    """The fields an update changed (a value given but equal to the stored one is not listed)."""
    changed = [f for f in ("title", "url", "metadata") if getattr(before, f) != getattr(after, f)]
    return changed + (["content"] if before.content_hash != after.content_hash else [])


async def delete_document(app: Archivist, args: DocumentArguments) -> dict[str, Any]:
    parse_uuid(args.document_id, "document_id", DOC_HINT)
    removed = await app.documents.delete(args.document_id)
    return {**removed, "message": f"Deleted the document and its {removed['chunks_deleted']} chunks."}


ACTIONS = {
    "create": create_document,
    "get": get_document,
    "list": list_documents,
    "update": update_document,
    "delete": delete_document,
    "outline": outline_document,
}


def register(mcp: MCPServer, runtime: Runtime) -> None:
    async def manage_document(args: DocumentArguments, ctx: Context) -> CallToolResult:
        return await dispatch(NAME, runtime, ACTIONS, args)

    mcp.add_tool(
        tool_function(NAME, DocumentArguments, manage_document, Annotated[CallToolResult, DocumentReply]),
        description=DESCRIPTION,  # no annotations: each hint is the spec's default (writes, deletes, fetches URLs)
        meta=APP_META,  # the MCP App shows a `get` (tools/app_ui.py)
    )
