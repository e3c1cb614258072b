"""The HTTP server around MCP and the console: one Host allow-list on the whole app, bounded bodies,
X-RateLimit-* headers on /mcp (access/rate_headers.py), and uvicorn's own TLS (commands/serve.py runs
it, with clean stops).

Starlette's TrustedHostMiddleware refuses (400) any Host not on the list of services/access/hosts.py,
on every path; the SDK's transport security on /mcp gets the same list, so both agree. Starlette's
RequestBodyLimitMiddleware caps every body (counted as it streams, chunked ones included); routes
lower it further (web/core.py). A client that hangs up mid-request is ordinary: one short line at
INFO, never an ERROR with a traceback (`QuietDisconnects`)."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware.body_limit import RequestBodyLimitMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import ClientDisconnect
from starlette.routing import Route

from access.guard import GuardedServer
from access.rate_headers import RateLimitHeaders
from services.access.hosts import HostPolicy
from services.core.settings import Settings

logger = logging.getLogger(__name__)
#: multipart framing around the one uploaded file
UPLOAD_OVERHEAD = 64 * 1024


#: loggers that report a client's hang-up as an error with its traceback (the SDK's transport, uvicorn)
DISCONNECT_LOGGERS = ("mcp.server.streamable_http", "uvicorn.error")


class QuietDisconnects(logging.Filter):
    """Turns a record carrying ClientDisconnect into one INFO line (dropped below INFO)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not isinstance(error, ClientDisconnect):
            return True
        record.msg, record.args = "a client disconnected before its request was read", ()
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        record.levelno, record.levelname = logging.INFO, "INFO"
        return logging.getLogger().isEnabledFor(logging.INFO)


def quiet_disconnects() -> None:
    """Install the filter once on each logger that reports hang-ups."""
    for name in DISCONNECT_LOGGERS:
        target = logging.getLogger(name)
        if not any(isinstance(f, QuietDisconnects) for f in target.filters):
            target.addFilter(QuietDisconnects())


def host_policy(settings: Settings, host: str) -> HostPolicy:
    return HostPolicy.for_server(host, settings.allowed_hosts)


def transport_security(policy: HostPolicy) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding check on /mcp, from the same names (any port, http or https)."""
    names = policy.names
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*names, *(f"{n}:*" for n in names)],
        allowed_origins=[f"{s}://{n}{p}" for s in ("http", "https") for n in names for p in ("", ":*")],
    )


def body_limit(settings: Settings) -> int:
    """The largest body any route accepts: one upload, or one MCP message."""
    return max(settings.max_file_bytes + UPLOAD_OVERHEAD, DEFAULT_MAX_REQUEST_BODY_SIZE)


class HttpServer(GuardedServer, Protocol):
    """The MCP server served over HTTP (server.ArchivistServer): the gate's server with the SDK's app."""

    def streamable_http_app(
        self,
        *,
        streamable_http_path: str,
        stateless_http: bool,
        transport_security: TransportSecuritySettings,
        host: str,
    ) -> Starlette: ...


def http_app(server: HttpServer, settings: Settings, host: str, *, stateless: bool = False) -> Any:
    """The streamable-HTTP app (with the console mounted by the caller), hardened."""
    quiet_disconnects()
    policy = host_policy(settings, host)
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=stateless,
        transport_security=transport_security(policy),
        host=host,
    )
    for route in app.router.routes:  # the caller's rate bucket on every /mcp response
        if isinstance(route, Route) and route.path == "/mcp":
            route.app = RateLimitHeaders(route.app, server)
    app.add_middleware(RequestBodyLimitMiddleware, max_body_size=body_limit(settings))
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=policy.names, www_redirect=False)
    return app
