"""The one gate for every MCP request that reads or writes data.

`gated()` runs a request inside its caller's scope, after one call from the caller's rate bucket,
within the call timeout, and queues exactly one audit record whatever the outcome (refusals included).
Two doors lead into it, and only two:

- `AccessMiddleware`, installed on the SDK's middleware chain, which wraps *every* inbound request:
  anything but the handshake/discovery methods in OPEN_METHODS and `tools/call` is gated there:
  resources/list, resources/read, resource templates, prompts, completions, subscriptions and any
  method a future SDK or protocol version adds. A refusal is a JSON-RPC error.
- `ArchivistServer.call_tool` (server.py) for `tools/call`, because a tool's refusal is a tool
  result in the JSON error contract (success=false, error_code, retryable, suggestion).

Only this module reads the SDK's access token (and its verified user, `bearer_verified`). Services
see the caller only as the entered Scope; with none entered `current_scope()` raises, so a path that
skips this gate fails closed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS

from services.access.gate import Outcome, admitted, call_time_limit, caller_from_bearer, caller_from_token
from services.access.identity import UNVERIFIED, Caller
from services.core.errors import ServiceError, service_error_from
from tools.common import failure, failure_from, rpc_error

if TYPE_CHECKING:
    from services.app import Runtime

logger = logging.getLogger(__name__)
HIDDEN_ARGUMENTS = frozenset({"self", "ctx", "runtime"})
#: methods that read no stored data: the handshake, discovery and the tool list (which names only
#: the caller's own profiles). Everything else that has a handler goes through the gate.
OPEN_METHODS = frozenset({"initialize", "ping", "server/discover", "tools/list", "logging/setLevel"})
#: set on an HTTP request by the /mcp gate (access/http_auth.py) when services/access/open_state.py
#: admitted it without a bearer: only such a request is the local owner
OPEN_MARK = "archivist.open_owner"
RPC_NAMES = {INVALID_PARAMS: "NOT_FOUND", -32029: "RATE_LIMITED", -32001: "TIMEOUT"}


def caller_of(profiles: list[str], request: Any) -> Caller:
    """This request's caller: the verified bearer token's claims, else the server's own profiles
    (`serve --profile`, ARCHIVIST_PROFILES) as the local owner over stdio or an open loopback HTTP
    request; an HTTP request with neither is refused at admission (fails closed)."""
    token = get_access_token()
    if token is not None:
        return caller_from_bearer(token.client_id, token.claims or {})
    headers = getattr(request, "headers", None)
    if headers is None:
        return caller_from_token(None, transport="stdio", profiles=profiles)
    if not getattr(request, "scope", {}).get(OPEN_MARK):  # no bearer, and the open-state predicate said no
        return caller_from_token(None, transport=UNVERIFIED)
    return caller_from_token(None, transport="local", session=session_of(request), profiles=profiles)


def bearer_verified(asgi_scope: Mapping[str, Any]) -> bool:
    """Whether the SDK's authentication middleware verified a bearer token on this HTTP request (the
    /mcp gate of access/http_auth.py lets a request without one through only while it is open)."""
    return isinstance(asgi_scope.get("user"), AuthenticatedUser)


def session_of(request: Any) -> str | None:
    """The owner's rate-bucket key on HTTP: its MCP session (mcp-session-id), or, for the session-less
    2026-07-28 protocol, the client's connection (address and port: one per client in practice)."""
    session = request.headers.get("mcp-session-id")
    if session:
        return f"session:{session}"
    client = getattr(request, "client", None)
    return f"connection:{client.host}:{client.port}" if client else None


async def gated(
    runtime: Runtime,
    caller: Caller,
    name: str,
    arguments: dict[str, Any],
    run: Callable[[], Awaitable[Any]],
    refuse: Callable[[Exception], Any],
    measure: Callable[[Any, Outcome], None],
    timeout: bool = True,
) -> Any:
    """An MCP request through the one gate (services/access/gate.admitted): admit, run in scope (within
    the call time limit unless the request sets its own), audit once with the request's own arguments."""
    args = {k: v for k, v in (arguments or {}).items() if v is not None and k not in HIDDEN_ARGUMENTS}
    action = args.get("action") if isinstance(args.get("action"), str) else None
    if name == "search_knowledge_base":
        action = "search"

    async def limited() -> Any:
        app = runtime.ready()
        async with call_time_limit(app.settings if app else None, name, suggestion="Retry."):
            return await run()

    return await admitted(
        runtime.get,
        caller,
        name,
        args,
        limited if timeout else run,
        refuse=refuse,
        measure=measure,
        action=action,
        classify=classify,
    )


def classify(exc: BaseException) -> tuple[str, str | None]:
    """The audit's code and message of a failure: a protocol error's own, else the service's."""
    return error_code(exc), error_message(exc)


def error_code(exc: BaseException) -> str:
    if isinstance(exc, asyncio.CancelledError):
        return "CANCELLED"
    if isinstance(exc, ServiceError):
        return exc.code
    if isinstance(exc, MCPError):
        data = exc.error.data if isinstance(exc.error.data, dict) else {}
        return str(data.get("error_code") or RPC_NAMES.get(exc.error.code, "INTERNAL"))
    if isinstance(exc, Exception) and (mapped := service_error_from(exc)) is not None:
        return mapped.code
    return "INTERNAL"


def error_message(exc: BaseException) -> str | None:
    """What the audit keeps of a refusal: the service's or protocol's message (redacted and cut there);
    for anything else only its kind, never an internal exception's text."""
    if isinstance(exc, ServiceError):
        return exc.message
    if isinstance(exc, MCPError):
        return exc.error.message
    if isinstance(exc, Exception) and (mapped := service_error_from(exc)) is not None:
        return mapped.message
    return type(exc).__name__


# --- tools/call: refusals are tool results in the JSON error contract -------------------------------


def tool_refusal(name: str) -> Callable[[Exception], Any]:
    def refuse(exc: Exception) -> Any:
        mapped = exc if isinstance(exc, ServiceError) else service_error_from(exc)
        if mapped is None:
            logger.error("access check for %s failed", name, exc_info=exc)
            return failure("INTERNAL", f"{name} failed with an internal error.", "Retry once.", retryable=True)
        return failure_from(mapped)

    return refuse


def measure_tool(result: Any, outcome: Outcome) -> None:
    """(error_code or None, response size in characters) of a tool reply: the code and message are read
    off its structured reply (tools/common.tool_result builds it beside the text), never parsed back."""
    content = getattr(result, "content", None)
    text = content[0].text if content and hasattr(content[0], "text") else ""
    outcome.code, outcome.size = None, len(text)
    if getattr(result, "is_error", False):
        body = getattr(result, "structured_content", None)
        body = body if isinstance(body, dict) else {}
        outcome.code, outcome.message = body.get("error_code") or "INTERNAL", body.get("error")


async def guarded_call(
    runtime: Runtime, profiles: list[str], request: Any, name: str, arguments: dict[str, Any], run: Any
) -> Any:
    """A tool call through the gate (the tools apply their own per-action time limit)."""
    caller = caller_of(profiles, request)
    return await gated(runtime, caller, name, arguments, run, tool_refusal(name), measure_tool, timeout=False)


# --- every other request: the SDK middleware ---------------------------------------------------------


def rpc_refusal(exc: Exception) -> Any:
    """An admission failure of a non-tool request as a JSON-RPC error (raised)."""
    mapped = exc if isinstance(exc, ServiceError) else service_error_from(exc)
    if mapped is None:
        logger.error("access check failed", exc_info=exc)
        raise MCPError(code=INTERNAL_ERROR, message="Internal error: the access check failed. Retry once.")
    raise rpc_error(mapped)


def measure_rpc(result: Any, outcome: Outcome) -> None:
    outcome.code = None
    try:
        outcome.size = len(json.dumps(result, default=str))
    except (TypeError, ValueError):
        outcome.size = 0


class GuardedServer(Protocol):
    """The MCP server the gate serves (server.ArchivistServer): an SDK MCPServer with its services and
    its `serve --profile` selection."""

    runtime: Runtime
    profiles: list[str]

    def serves(self, method: str) -> bool: ...


class AccessMiddleware:
    """SDK middleware: every inbound request that may touch stored data passes `gated()`."""

    def __init__(self, server: GuardedServer) -> None:
        self.server = server

    def gates(self, method: str) -> bool:
        if method in OPEN_METHODS or method.startswith("notifications/") or method == "tools/call":
            return False
        return bool(self.server.serves(method))

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if not self.gates(ctx.method):
            return await call_next(ctx)
        caller = caller_of(self.server.profiles, ctx.request)
        arguments = {k: v for k, v in dict(ctx.params or {}).items() if k != "_meta"}

        timeout = ctx.method != "subscriptions/listen"  # a notification stream lives as long as it is open
        try:
            return await gated(
                self.server.runtime,
                caller,
                ctx.method,
                arguments,
                lambda: call_next(ctx),
                rpc_refusal,
                measure_rpc,
                timeout,
            )
        except ServiceError as exc:  # the call timeout
            return rpc_refusal(exc)
