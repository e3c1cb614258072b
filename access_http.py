"""Bearer-token auth for streamable HTTP through the mcp SDK's own hooks (TokenVerifier +
AuthSettings: 401 with WWW-Authenticate, protected-resource metadata), and the per-call scope."""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken as SdkToken
from mcp.server.auth.settings import AuthSettings

from services.scope import Scope

logger = logging.getLogger(__name__)


class ArchivistTokenVerifier:
    """Checks each request's bearer secret in PostgreSQL (revocation/expiry apply on the next request)."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime

    async def verify_token(self, token: str) -> SdkToken | None:
        app = await self.runtime.get()
        record = await app.tokens.verify(token)
        if record is None:
            return None
        return SdkToken(
            token="",
            client_id=record.name,
            scopes=[],
            claims={"profiles": record.profiles, "read_only": record.read_only, "rate": record.rate_per_minute},
        )


def auth_settings(host: str, port: int) -> AuthSettings:
    url = f"http://{host}:{port}/mcp"
    return AuthSettings(issuer_url=f"http://{host}:{port}", resource_server_url=url, validate_token_resource=False)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def call_scope(runtime: Any, profiles: list[str]) -> Scope:
    """The scope of this call: the bearer token's profiles/read-only flag, else the server's --profile."""
    app = await runtime.get()
    token = get_access_token()
    if token is not None:
        claims = token.claims or {}
        return await app.profiles.scope_for(
            list(claims.get("profiles") or []), read_only=bool(claims.get("read_only")), who=token.client_id
        )
    return await app.profiles.scope_for(profiles, who="stdio")


async def tokens_exist(settings: Any) -> bool:
    """Whether any active token exists (decides at start-up whether HTTP requires a bearer token)."""
    import asyncpg

    from services.database import resolve_dsn

    conn = await asyncpg.connect(await resolve_dsn(settings))
    try:
        exists = await conn.fetchval("SELECT to_regclass('access_tokens') IS NOT NULL")
        if not exists:
            return False
        return bool(
            await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM access_tokens WHERE revoked_at IS NULL "
                "AND (expires_at IS NULL OR expires_at > now()))"
            )
        )
    finally:
        await conn.close()


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
