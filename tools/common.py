"""The JSON contract every tool follows: success payloads, errors, truncation, pagination."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, InputRequiredResult, ResourceLink, TextContent

from models import Document, Page, Source
from services.access.disclosure import outgoing_text
from services.access.gate import call_time_limit as gate_time_limit
from services.access.scope import current_scope
from services.core.errors import InvalidArgument, RateLimited, ServiceError, service_error_from
from services.core.validation import MAX_PER_PAGE
from services.documents.freshness import freshness_fields
from services.documents.text import mime_type

if TYPE_CHECKING:
    from services.app import Archivist, Runtime

logger = logging.getLogger(__name__)

TEXT_LIMIT = 1000
TITLE_LIMIT = 200
METADATA_LIMIT = 1000
MAX_LINKS = 20
#: Actions served from the read replica when one is configured (services.core.database.Database.reading).
READ_ACTIONS = frozenset({"get", "list", "status"})
#: JSON-RPC error codes for refusals of non-tool requests (out of scope reads as not found)
RPC_CODES = {"NOT_FOUND": INVALID_PARAMS, "INVALID_ARGUMENT": INVALID_PARAMS, "RATE_LIMITED": -32029}


def jsonable(value: Any) -> Any:
    """The value as JSON's own types, once: what `json.dumps` would write, as Python (datetimes as ISO
    text, UUIDs and anything else JSON has no type for as text, NaN and infinities as text: JSON has
    no such numbers). A reply's structured content is this; its text is this, dumped."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {json_key(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def json_key(key: Any) -> str:
    """A mapping key as JSON writes it."""
    if isinstance(key, str):
        return str.__str__(key)
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    return str(key)


def dumped(value: Any) -> str:
    """Compact JSON (no spaces after separators: every reply is read by a model, token by token)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def to_json(payload: dict[str, Any]) -> str:
    return dumped(jsonable(payload))


def tool_result(body: dict[str, Any], is_error: bool = False) -> CallToolResult:
    """The one place a tool reply is built, once: its structured content, the same as JSON text, and
    resource links (never encoded and parsed back)."""
    structured = jsonable(body)
    content: list[Any] = [TextContent(type="text", text=dumped(structured)), *resource_links(body)]
    return CallToolResult(content=content, structured_content=structured, is_error=is_error)


def success(payload: dict[str, Any]) -> CallToolResult:
    return tool_result({"success": True, **payload})


def failure(
    code: str, error: str, suggestion: str, retryable: bool = False, extra: dict[str, Any] | None = None
) -> CallToolResult:
    """The error contract: the flat fields (error, error_code, retryable, suggestion) exactly as the
    contract names them, and the same three facts nested as `error_detail` {code, message, retryable}
    for clients that read errors in the chat module's shape."""
    suggestion = suggestion or "Check the arguments against the tool description and try again."
    message = outgoing_text(error)  # over HTTP: no server paths; never secrets
    body = {
        "success": False,
        "error": message,
        "error_code": code,
        "retryable": retryable,
        "suggestion": outgoing_text(suggestion),
        **(extra or {}),
        "error_detail": {"code": code, "message": message, "retryable": retryable},
    }
    return tool_result(body, is_error=True)


def document_uri(document_id: Any) -> str:
    return f"archivist://documents/{document_id}"


def source_uri(source_id: Any) -> str:
    return f"archivist://sources/{source_id}"


def resource_links(body: dict[str, Any]) -> list[ResourceLink]:
    """Links to the documents a reply names (search results, passages, a created document)."""
    items = [body["document"]] if isinstance(body.get("document"), dict) else []
    items += [i for key in ("results", "passages") for i in body.get(key) or [] if isinstance(i, dict)]
    links: dict[str, ResourceLink] = {}
    for item in items:
        uri = item.get("uri") or (document_uri(item["document_id"]) if item.get("document_id") else None)
        cited = item.get("citation") if isinstance(item.get("citation"), dict) else {}
        title = item.get("title") or item.get("document_title") or cited.get("document_title") or "document"
        if isinstance(uri, str) and uri not in links and len(links) < MAX_LINKS:
            links[uri] = ResourceLink(type="resource_link", uri=uri, name=str(title)[:TITLE_LIMIT])
    return list(links.values())


def failure_from(exc: ServiceError) -> CallToolResult:
    after = exc.retry_after_seconds if isinstance(exc, RateLimited) else None
    extra = {"retry_after_seconds": after} if after is not None else None
    return failure(exc.code, exc.message, exc.suggestion, exc.retryable, extra)


def rpc_error(exc: ServiceError) -> MCPError:
    """A refusal of a non-tool request (resources, subscriptions) as a JSON-RPC error carrying the
    contract's error_code, retryable (and retry_after_seconds) in its data."""
    data: dict[str, Any] = {"error_code": exc.code, "retryable": exc.retryable}
    if isinstance(exc, RateLimited) and exc.retry_after_seconds is not None:
        data["retry_after_seconds"] = exc.retry_after_seconds
    message = f"{exc.message} {exc.suggestion}".strip()
    return MCPError(code=RPC_CODES.get(exc.code, INTERNAL_ERROR), message=message, data=data)


async def run_tool(
    name: str, body: Callable[[], Awaitable[dict[str, Any] | InputRequiredResult]]
) -> CallToolResult | InputRequiredResult:
    """Run a tool body; service errors become the error contract, anything else INTERNAL (logged). A body
    that asks the client first (an `InputRequiredResult`: MCP sampling, tools/sampling.py) returns it."""
    try:
        payload = await body()
        return payload if isinstance(payload, InputRequiredResult) else success(payload)
    except ServiceError as exc:
        logger.info("%s: %s %s", name, exc.code, exc.message)
        return failure_from(exc)
    except Exception as exc:
        mapped = service_error_from(exc)
        if mapped is not None:
            logger.warning("%s: %s (%s: %s)", name, mapped.code, type(exc).__name__, exc)
            return failure_from(mapped)
        logger.exception("%s failed", name)
        return failure(
            "INTERNAL",
            f"{name} failed with an internal error.",
            "Retry once; if it fails again, report it with the server's log.",
            retryable=True,
        )


def cut(text: str | None, limit: int = TEXT_LIMIT) -> tuple[str | None, bool]:
    """Cut text to `limit` characters; the flag says whether anything was removed."""
    if text is None or len(text) <= limit:
        return text, False
    return text[: limit - 1] + "…", True


def require_action(action: str | None, handlers: Mapping[str, H]) -> H:
    if not action or action not in handlers:
        raise InvalidArgument(
            f"Unknown action: {action!r}." if action else "action is required.",
            f"Use action= one of: {', '.join(handlers)}.",
        )
    return handlers[action]


def call_time_limit(app: Archivist, label: str, extra: float = 0.0) -> AbstractAsyncContextManager[None]:
    """The per-call execution limit of a tool (services/access/gate.call_time_limit, the one the gate
    applies to other requests too): past it the work is cancelled and the call answers TIMEOUT."""
    return gate_time_limit(app.settings, label, extra)


class ActionArguments(Protocol):
    """What dispatch needs of a tool's arguments (tools.arguments.ToolArguments with an `action`)."""

    @property
    def action(self) -> str: ...

    def cleaned(self: A) -> A: ...

    def model_copy(self: A, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> A: ...


A = TypeVar("A", bound=ActionArguments)
H = TypeVar("H")
Handler = Callable[["Archivist", A], Awaitable[dict[str, Any]]]


async def dispatch(tool: str, runtime: Runtime, actions: Mapping[str, Handler[A]], args: A) -> CallToolResult:
    """Run the handler for `args.action` with the started services and the tool's arguments (the server's
    call_tool has set the caller's scope and audits the call; see access/guard.py)."""

    async def body() -> dict[str, Any]:
        action = args.action
        handler = require_action(action, actions)
        cleaned, note = clamp_per_page(args.cleaned())  # NUL etc. removed from every text, at one place
        app = await runtime.get()
        if action in WRITE_ACTIONS:
            current_scope().check_write(f"{tool}(action='{action}')")
        extra = float(getattr(cleaned, "wait_seconds", 0) or 0) if action == "status" else 0.0
        async with call_time_limit(app, f"{tool}(action='{action}')", extra):
            if action in READ_ACTIONS:
                async with app.db.reading():
                    payload = await handler(app, cleaned)
            else:
                payload = await handler(app, cleaned)
        return {**payload, "note": note} if note else payload

    result = await run_tool(tool, body)
    assert isinstance(result, CallToolResult)  # the handlers return payloads, never a question
    return result


WRITE_ACTIONS = frozenset({"create", "update", "delete", "start", "cancel", "recrawl", "sync"})


def clamp_per_page(args: A) -> tuple[A, str | None]:
    """per_page above the maximum is clamped (tools-spec); the reply then carries a note."""
    per_page = getattr(args, "per_page", None)
    if isinstance(per_page, int) and per_page > MAX_PER_PAGE:
        note = f"per_page {per_page} was clamped to {MAX_PER_PAGE} (the maximum)."
        return args.model_copy(update={"per_page": MAX_PER_PAGE}), note
    return args, None


def page_fields(page: Page[Any], key: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    fields = {
        key: items,
        "total_count": page.total_count,
        "count": len(items),
        "page": page.page,
        "per_page": page.per_page,
        "has_more": page.has_more,
    }
    if page.start is not None:  # asked for by offset: say where the next one starts
        fields.update(offset=page.start, next_offset=page.start + len(items) if page.has_more else None)
    return fields


def metadata_view(metadata: dict[str, Any]) -> tuple[dict[str, Any] | str, bool]:
    text = to_json(metadata)
    if len(text) <= METADATA_LIMIT:
        return metadata, False
    return text[: METADATA_LIMIT - 1] + "…", True


def source_view(source: Source) -> dict[str, Any]:
    title, title_cut = cut(source.title, TITLE_LIMIT)
    description, description_cut = cut(source.description)
    metadata, metadata_cut = metadata_view(source.metadata)
    return {
        "id": source.id,
        "uri": source_uri(source.id),
        "title": title,
        "description": description,
        "url": source.url,
        "source_type": source.source_type,
        "version": source.version,
        "status": source.status,
        "metadata": metadata,
        "created_at": source.created_at,
        "updated_at": source.updated_at,
        "truncated": title_cut or description_cut or metadata_cut,
    }


def document_view(document: Document) -> dict[str, Any]:
    title, title_cut = cut(document.title, TITLE_LIMIT)
    metadata, metadata_cut = metadata_view(document.metadata)
    return {
        "id": document.id,
        "uri": document_uri(document.id),
        "source_id": document.source_id,
        "title": title,
        "url": document.url,
        "document_type": document.document_type,
        "mime_type": mime_type(document),
        "content_length": document.content_length,
        **({"size_bytes": document.size_bytes} if document.size_bytes is not None else {}),
        "chunks_count": document.chunk_count,
        **document_status(document),
        "metadata": metadata,
        "created_at": document.created_at,
        "updated_at": document.updated_at,
        **freshness_fields(document.fetched_at, document.ingested_at, document.indexed_at, document.metadata),
        "truncated": title_cut or metadata_cut,
    }


def document_status(document: Document) -> dict[str, str]:
    """`status`: `ready` (every chunk embedded) or `pending_embedding` (keyword-searchable, vectors to come),
    where it was read (get, list)."""
    if document.embedding_pending is None:
        return {}
    return {"status": "pending_embedding" if document.embedding_pending else "ready"}


def page_number_field(page_start: int | None, page_end: int | None) -> dict[str, int | str]:
    """`{"page_number": 3}` or `{"page_number": "3-4"}` (a chunk spanning pages) for chunks of paged
    documents (PDF pages, PPTX slides); `{}` for everything else."""
    from services.chunking.pages import format_page_number

    page_number = format_page_number(page_start, page_end)
    return {} if page_number is None else {"page_number": page_number}
