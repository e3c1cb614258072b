"""Per-call access for every MCP tool call: the caller's scope (token or `--profile`), its rate
limit, and one audit entry per call (refusals included), queued off the request path."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token

from services.access.scope import Scope, use_scope
from services.errors import service_error_from
from tools.common import failure, failure_from

logger = logging.getLogger(__name__)
HIDDEN_ARGUMENTS = frozenset({"self", "ctx", "runtime"})


async def call_scope(runtime: Any, profiles: list[str]) -> Scope:
    """The scope of this call: the bearer token's profiles/read-only flag, else the server's --profile."""
    app = await runtime.get()
    token = get_access_token()
    if token is not None:
        claims = token.claims or {}
        scope = await app.profiles.scope_for(
            list(claims.get("profiles") or []), read_only=bool(claims.get("read_only")), who=token.client_id
        )
        return dataclasses.replace(scope, max_running_jobs=claims.get("max_jobs"))
    return await app.profiles.scope_for(profiles, who="stdio")


async def check_rate(runtime: Any) -> None:
    """One call from the caller's bucket: the token's own (override or default), else the shared one."""
    app = await runtime.get()
    token = get_access_token()
    rate = app.settings.rate_per_minute
    key = "local"
    if token is not None:
        key = f"token:{token.client_id}"
        rate = (token.claims or {}).get("rate") or rate
    await app.ratelimit.take(key, int(rate))


def access_failure(name: str, exc: Exception) -> Any:
    mapped = service_error_from(exc)
    if mapped is None:
        logger.exception("access check for %s failed", name)
        return failure("INTERNAL", f"{name} failed with an internal error.", "Retry once.", retryable=True)
    return failure_from(mapped)


async def guarded_call(
    runtime: Any, profiles: list[str], name: str, arguments: dict[str, Any], run: Callable[[], Awaitable[Any]]
) -> Any:
    """Scope and rate-limit the call, run it inside its scope, and audit it (whatever the outcome)."""
    started = time.perf_counter()
    scope: Scope | None = None
    try:
        scope = await call_scope(runtime, profiles)
        await check_rate(runtime)
    except Exception as exc:  # e.g. an unknown profile, the rate limit, the database down
        result = access_failure(name, exc)
    else:
        with use_scope(scope):
            result = await run()
    audit_call(runtime, scope, name, arguments, result, started)
    return result


def outcome(result: Any) -> tuple[str | None, int]:
    """(error_code or None, response size in characters) of a tool reply."""
    content = getattr(result, "content", None)
    text = content[0].text if content and hasattr(content[0], "text") else ""
    code = None
    if getattr(result, "is_error", False):
        try:
            code = json.loads(text).get("error_code") or "INTERNAL"
        except (ValueError, AttributeError):
            code = "INTERNAL"
    return code, len(text)


def audit_call(
    runtime: Any, scope: Scope | None, name: str, arguments: dict[str, Any], result: Any, started: float
) -> None:
    """Queue one audit entry; never blocks, never raises (see services.access.audit)."""
    try:
        app = runtime.ready()
        if app is None:
            return
        if scope is None:
            token = get_access_token()
            who, profiles = (token.client_id if token else "stdio"), []
        else:
            who, profiles = scope.who, scope.profiles
        args = {k: v for k, v in (arguments or {}).items() if v is not None and k not in HIDDEN_ARGUMENTS}
        action = args.get("action") if isinstance(args.get("action"), str) else None
        if name == "search_knowledge_base":
            action = "search"
        code, size = outcome(result)
        latency = (time.perf_counter() - started) * 1000
        app.audit.record(name, action, who, profiles, args, code, latency, size)
    except Exception:
        logger.warning("audit record failed", exc_info=True)
