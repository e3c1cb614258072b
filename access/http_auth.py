"""Bearer-token auth for streamable HTTP through the mcp SDK's own hooks (TokenVerifier +
AuthSettings: 401 with WWW-Authenticate, protected-resource metadata), decided per request.

Every HTTP server installs the SDK's verifier and auth settings. `AuthGate` replaces the SDK's
`RequireAuthMiddleware` on /mcp with a subclass that lets a request without a bearer through only
when services/access/open_state.py says it is open: loopback, not relayed by a proxy, and either
ARCHIVIST_SINGLE_USER or no token or identity provider ever existed here (revoking or expiring the
last token never reopens it). The first `archivist token create` (from any process) takes effect on
the next request, without a restart. Token checks use a small pool of their own: they never wait for
the models to load.

With ARCHIVIST_OAUTH_ISSUER set (issue 20, docs/identity.md), the verifier also accepts the issuer's
access tokens (checked by services/access/oauth.py), the protected-resource metadata (RFC 9728) names
that issuer, and /mcp always needs a bearer: a 401 tells MCP clients where to sign in. A valid token
without ARCHIVIST_OAUTH_REQUIRED_SCOPES is passed on with its own scopes, so the SDK's middleware
answers it 403 `insufficient_scope` (RFC 6750 section 3.1) rather than 401.

Without an issuer there is no authorization server to advertise: the SDK's protected-resource metadata
(which would name this server itself, whose /.well-known/oauth-authorization-server does not exist) is
taken off the app, and the 401 names no metadata and says a bearer token is needed (issue 28).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import asyncpg
from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken as SdkToken
from mcp.server.auth.routes import create_protected_resource_routes
from mcp.server.auth.settings import AuthSettings
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Send
from starlette.types import Scope as AsgiScope

from access.guard import OPEN_MARK, bearer_verified
from services.access.oauth import WRITE_SCOPE, InvalidToken, OAuthConfig, OAuthVerifier
from services.access.open_state import OpenDoor
from services.access.tokens import PREFIX, TokenService
from services.core.settings import Settings

logger = logging.getLogger(__name__)
METADATA_PATH = "/.well-known/oauth-protected-resource"
#: the 401's error_description without an issuer (quoted in WWW-Authenticate: no double quotes)
TOKEN_NEEDED = (
    "This server needs a bearer token (Authorization: Bearer <token>); "
    "create one on the server with: archivist token create --name NAME"
)


class AuthDb:
    """A small pool for token checks (the `pool` attribute TokenService reads)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._pool: asyncpg.Pool | None = None

    @property
    def pool(self) -> asyncpg.Pool:
        assert self._pool is not None, "AuthDb.open() first"
        return self._pool

    async def open(self) -> AuthDb:
        if self._pool is None:
            from services.core.database import resolve_dsn

            self._pool = await asyncpg.create_pool(await resolve_dsn(self.settings), min_size=0, max_size=4)
        return self

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()


class ArchivistTokenVerifier:
    """Checks each request's bearer secret in PostgreSQL (revocation/expiry apply on the next request);
    with an issuer configured, a bearer that is not Archivist's own (`arch_...`) goes to its checks."""

    def __init__(self, auth_db: AuthDb, oauth: OAuthVerifier | None = None) -> None:
        self.auth_db = auth_db
        self.oauth = oauth

    async def verify_token(self, token: str) -> SdkToken | None:
        if self.oauth is not None and not token.startswith(PREFIX):
            return await self.verify_issuer_token(self.oauth, token)
        record = await TokenService(await self.auth_db.open()).verify(token)
        if record is None:
            return None
        claims = {
            "profiles": record.profiles,
            "read_only": record.read_only,
            "rate": record.rate_per_minute,
            "max_jobs": record.max_running_jobs,
        }
        # Archivist's own token is this server's credential: it carries the scopes the server requires
        scopes = list(self.oauth.config.required_scopes) if self.oauth is not None else []
        return SdkToken(token="", client_id=record.name, scopes=scopes, claims=claims)

    async def verify_issuer_token(self, oauth: OAuthVerifier, token: str) -> SdkToken | None:
        try:
            identity = await oauth.verify(token)
        except InvalidToken as exc:
            logger.info("bearer token refused: %s", exc)  # redacted in services.access.oauth
            return None
        except Exception:
            logger.warning("bearer token check failed", exc_info=True)
            return None
        return SdkToken(
            token="",
            client_id=identity.client_id or identity.subject or "oidc",
            scopes=list(identity.scopes),
            # the SDK refuses past `expires_at` with no clock skew: allow the same skew as the JWT check
            expires_at=identity.expires_at + int(oauth.config.leeway_seconds) if identity.expires_at else None,
            # the SDK binds a session to (client_id, iss, subject): never leave the person out of it
            subject=identity.subject or identity.label,
            claims={"iss": identity.issuer, "identity": identity},
        )


class AuthGate:
    """Whether a request to /mcp without a bearer is served as the local owner: the one predicate of
    services/access/open_state.py (the console and /healthz ask it too). A request it admits is marked
    (`OPEN_MARK`) so the access gate (access/guard.caller_of) serves it as the owner; an unmarked request
    without a bearer is nobody's."""

    def __init__(self, auth_db: AuthDb, settings: Settings, host: str, metadata: list[Route] | None = None) -> None:
        self.auth_db = auth_db
        self.door = OpenDoor(settings, host, self.pool)
        self.metadata = metadata or []  # the issuer's protected-resource metadata routes

    async def pool(self) -> asyncpg.Pool:
        return (await self.auth_db.open()).pool

    async def open_for(self, host: str, header_names: Iterable[str]) -> bool:
        return await self.door.admits(host, header_names)

    async def open_for_scope(self, scope: AsgiScope) -> bool:
        """The predicate for one ASGI request, from its Host and header names."""
        headers = [(k.decode("latin-1"), v) for k, v in scope.get("headers") or []]
        host = next((v.decode("latin-1") for k, v in headers if k.lower() == "host"), "")
        return await self.open_for(host, (k for k, _ in headers))

    def install(self, app: Starlette, path: str = "/mcp") -> None:
        """Swap the SDK's RequireAuthMiddleware on `path` for one that consults this gate (and, with
        an issuer, the SDK's protected-resource metadata for one that also lists the write scope;
        without one, no metadata at all)."""
        if self.metadata:
            paths = {r.path for r in self.metadata}
            kept = [r for r in app.router.routes if getattr(r, "path", None) not in paths]
            app.router.routes[:] = self.metadata + kept
        else:
            kept = [r for r in app.router.routes if not str(getattr(r, "path", "")).startswith(METADATA_PATH)]
            app.router.routes[:] = kept
        for route in getattr(app, "routes", []):
            if getattr(route, "path", None) == path and isinstance(route.app, RequireAuthMiddleware):
                gated = BearerUnlessOpen(route.app, self)
                route.app = route.endpoint = gated
                return
        raise RuntimeError(f"no auth-protected route at {path}")


class BearerUnlessOpen(RequireAuthMiddleware):
    """The SDK's RequireAuthMiddleware (401 + WWW-Authenticate), unless the gate is open and the
    request carries no Authorization header (a wrong token is refused even then). Without an issuer
    the challenge points at no metadata and says what is needed: one of Archivist's tokens."""

    def __init__(self, inner: RequireAuthMiddleware, gate: AuthGate) -> None:
        super().__init__(inner.app, inner.required_scopes, inner.resource_metadata_url if gate.metadata else None)
        self.gate = gate

    async def _send_auth_error(self, send: Send, status_code: int, error: str, description: str) -> None:
        if not self.gate.metadata and status_code == 401:
            description = TOKEN_NEEDED
        await super()._send_auth_error(send, status_code, error, description)

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        authed = bearer_verified(scope)
        has_header = any(k.lower() == b"authorization" for k, _ in scope.get("headers") or [])
        if not authed and not has_header and await self.gate.open_for_scope(scope):
            scope[OPEN_MARK] = True
            await self.app(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def http_auth(settings: Settings, host: str, port: int, scheme: str = "http") -> tuple[dict[str, Any], AuthGate]:
    """The SDK auth arguments for build_server, and the gate to install on the app."""
    auth_db = AuthDb(settings)
    base = (getattr(settings, "public_url", None) or f"{scheme}://{host}:{port}").rstrip("/")
    url = f"{base}/mcp"
    config = OAuthConfig.from_settings(settings, default_audience=url)
    # URLs as strings (validated by the SDK's model): AnyHttpUrl would add a trailing slash to an issuer
    if config is None:
        sdk = AuthSettings.model_validate(
            {"issuer_url": base, "resource_server_url": url, "validate_token_resource": False}
        )
        return {"token_verifier": ArchivistTokenVerifier(auth_db), "auth": sdk}, AuthGate(auth_db, settings, host)
    # The verifier checks `aud` itself (validate_token_resource=False): the SDK compares only `resource`
    required = list(config.required_scopes)
    sdk = AuthSettings.model_validate(
        {
            "issuer_url": config.issuer,
            "resource_server_url": url,
            "required_scopes": required,
            "validate_token_resource": False,
        }
    )
    verifier = ArchivistTokenVerifier(auth_db, OAuthVerifier(config))
    return {"token_verifier": verifier, "auth": sdk}, AuthGate(auth_db, settings, host, resource_metadata(config, url))


def resource_metadata(config: OAuthConfig, url: str) -> list[Route]:
    """RFC 9728 metadata naming the issuer and the scopes, at the path-suffixed well-known URL the
    401's `resource_metadata` points to and at the bare one (clients that look there first)."""
    scopes = list(dict.fromkeys([*config.required_scopes, WRITE_SCOPE]))
    # strings, not AnyHttpUrl: the issuer is compared exactly, and AnyHttpUrl would add a trailing slash
    routes = create_protected_resource_routes(url, [config.issuer], scopes, resource_name="Archivist")  # type: ignore[arg-type,list-item]
    bare = METADATA_PATH
    if routes[0].path != bare:
        routes.append(Route(bare, endpoint=routes[0].endpoint, methods=["GET", "OPTIONS"]))
    return routes
