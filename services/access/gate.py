"""The one gate below the edges: a caller built one way, admitted one way, audited once.

Every edge that lets a caller at stored data goes through `admitted()`: the MCP guard for tool calls
and every other gated request (access/guard.py), and the console for its pages and actions
(web/core.py). It builds nothing of its own: the edge says who is calling (`caller_from_token`, the
only place a token becomes a `Caller`), how a refusal looks to its callers (`refuse`: a tool result,
a JSON-RPC error, an error page) and how to read the outcome off what it answers (`measure`).

`call_time_limit` is the one per-call execution limit (ARCHIVIST_CALL_TIMEOUT_SECONDS): the MCP guard
for non-tool requests and each tool (tools/common.py) enter this one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from services.access.identity import AccessApp, Caller, rate_bucket, record, scope_of
from services.access.oauth import Identity
from services.access.scope import Scope, use_scope
from services.core.errors import CallTimeout, ServiceError, service_error_from

R = TypeVar("R")
DEFAULT_CALL_TIMEOUT = 60.0


class TokenLike(Protocol):
    """What a caller is built from: an Archivist token's record (models.access.AccessToken), or the
    claims of a verified bearer carrying the same fields (`BearerClaims`)."""

    @property
    def name(self) -> str: ...
    @property
    def profiles(self) -> list[str]: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def rate_per_minute(self) -> int | None: ...
    @property
    def max_running_jobs(self) -> int | None: ...


@dataclass(frozen=True)
class BearerClaims:
    """An Archivist token as the MCP transport verified it (access/http_auth.py puts these claims on it)."""

    name: str
    profiles: list[str]
    read_only: bool
    rate_per_minute: int | None
    max_running_jobs: int | None


def caller_from_bearer(name: str, claims: Mapping[str, Any]) -> Caller:
    """The caller of a verified MCP bearer token: the identity provider's identity, else the Archivist
    token the claims describe."""
    identity = claims.get("identity")
    if isinstance(identity, Identity):
        return caller_from_token(identity)
    bearer = BearerClaims(
        name=name,
        profiles=list(claims.get("profiles") or ()),
        read_only=bool(claims.get("read_only")),
        rate_per_minute=claims.get("rate"),
        max_running_jobs=claims.get("max_jobs"),
    )
    return caller_from_token(bearer)


def caller_from_token(
    token: TokenLike | Identity | None,
    *,
    transport: str = "stdio",
    session: str | None = None,
    profiles: tuple[str, ...] | list[str] = (),
) -> Caller:
    """The caller a request is, from what its transport verified: an identity-provider identity (its
    grants decide), an Archivist token's record (its profiles, read-only flag, rate and job limits),
    or nothing: the local owner on `transport`, confined by the server's own `profiles` if any."""
    if isinstance(token, Identity):
        return Caller(identity=token, transport="oidc")
    if token is not None:
        return Caller(
            token=token.name,
            profiles=tuple(token.profiles),
            read_only=bool(token.read_only),
            rate_per_minute=token.rate_per_minute,
            max_running_jobs=token.max_running_jobs,
        )
    return Caller(profiles=tuple(profiles), transport=transport, session=session)


async def admit(app: AccessApp, caller: Caller, *, rate: bool = True) -> Scope:
    """The caller's scope, after taking one call from its rate bucket (RateLimited when empty)."""
    scope = await scope_of(app, caller)
    bucket = rate_bucket(caller, app.settings) if rate else None
    if bucket is not None:
        await app.ratelimit.take(*bucket)
    return scope


def service_code(exc: BaseException) -> tuple[str, str | None]:
    """The audit's error code and message of a failure (a service's own, or the fault it stands for);
    for anything else only its kind, never an internal exception's text."""
    if isinstance(exc, asyncio.CancelledError):
        return "CANCELLED", type(exc).__name__
    if isinstance(exc, ServiceError):
        return exc.code, exc.message
    if isinstance(exc, Exception) and (mapped := service_error_from(exc)) is not None:
        return mapped.code, mapped.message
    return "INTERNAL", type(exc).__name__


class Outcome:
    """What the audit records of one call: its error code (None = success) and message, response size."""

    def __init__(self, classify: Callable[[BaseException], tuple[str, str | None]] = service_code) -> None:
        self.code: str | None = "INTERNAL"
        self.message: str | None = None
        self.size = 0
        self.classify = classify

    def failed(self, exc: BaseException) -> None:
        self.code, self.message = self.classify(exc)


async def admitted(
    open_app: Callable[[], Awaitable[Any]],
    caller: Caller,
    name: str,
    arguments: Mapping[str, Any],
    run: Callable[[], Awaitable[R]],
    *,
    refuse: Callable[[Exception], R],
    measure: Callable[[R, Outcome], None],
    action: str | None = None,
    rate: bool = True,
    audit: bool = True,
    classify: Callable[[BaseException], tuple[str, str | None]] = service_code,
) -> R:
    """Admit the caller (its scope, and with `rate` one call from its bucket), run inside its scope,
    and queue exactly one audit record (with `audit`) whatever the outcome, refusals included.
    `refuse` turns an admission failure into the edge's refusal (returned, or raised); `measure` reads
    the error code and size off a result."""
    started = time.perf_counter()
    app: Any = None
    scope: Scope | None = None
    outcome = Outcome(classify)
    try:
        try:
            app = await open_app()
            scope = await admit(app, caller, rate=rate)
        except Exception as exc:  # an unknown profile, the rate limit, the database down
            outcome.failed(exc)
            result = refuse(exc)
        else:
            with use_scope(scope):
                result = await run()
        measure(result, outcome)
        return result
    except BaseException as exc:
        outcome.failed(exc)
        raise
    finally:
        if audit and app is not None:
            latency = (time.perf_counter() - started) * 1000
            args = dict(arguments)
            record(app, caller, scope, name, action, args, outcome.code, latency, outcome.size, outcome.message)


@asynccontextmanager
async def call_time_limit(
    settings: Any, label: str, extra: float = 0.0, suggestion: str = "Retry, or narrow the request."
) -> AsyncIterator[None]:
    """The per-call execution limit (ARCHIVIST_CALL_TIMEOUT_SECONDS, plus `extra`): past it the work
    is cancelled (transactions roll back) and the call answers TIMEOUT, retryable."""
    limit = float(getattr(settings, "call_timeout_seconds", DEFAULT_CALL_TIMEOUT)) + extra
    try:
        async with asyncio.timeout(limit):
            yield
    except TimeoutError:
        message = f"{label} took longer than {limit:g}s and was cancelled."
        raise CallTimeout(message, suggestion, retryable=True) from None
