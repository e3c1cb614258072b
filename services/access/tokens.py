"""Access tokens for streamable HTTP: random secrets, only their SHA-256 stored. Every statement on the
tokens table is here, "does any active token exist" included (`doctor`, `token revoke` and the start-up
refusal of an open public bind ask it) and "was one ever made" (the open-state predicate before sql/033,
services/access/open_state.py; a trigger of sql/033 remembers every token made since)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Protocol
from uuid import UUID

import asyncpg

from models.access import AccessToken
from services.access.scope import OWNER_NAMES
from services.core.database import resolve_dsn
from services.core.errors import Conflict, InvalidArgument, NotFound
from services.core.settings import Settings

PREFIX = "arch_"
#: caller names of the local owner (audit `who`, job `started_by`, rate buckets): no token may take one
RESERVED_NAMES = OWNER_NAMES | {"worker", "nobody", "system", "unverified"}
#: the `who` of identity-provider tokens (services/access/oauth.py): no token name may start with it
IDENTITY_PREFIX = "oidc:"
COLUMNS = (
    "id, name, prefix, profiles, read_only, rate_per_minute, max_running_jobs, expires_at, revoked_at, "
    "last_used_at, created_at"
)

ACTIVE_TOKENS_SQL = (
    "SELECT EXISTS (SELECT 1 FROM access_tokens WHERE revoked_at IS NULL "
    "AND (expires_at IS NULL OR expires_at > now()))"
)

#: whether a token was ever made here, revoked and expired ones included (services/access/open_state.py
#: asks it only before sql/033's access_state exists)
TOKENS_EVER_MADE_SQL = "SELECT EXISTS (SELECT 1 FROM access_tokens)"


class Pooled(Protocol):
    """What TokenService needs of a database: its pool (services.core.database.Database, or the small pool of
    its own that the HTTP token checks use, access/http_auth.AuthDb)."""

    @property
    def pool(self) -> asyncpg.Pool: ...


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _to_token(row: asyncpg.Record) -> AccessToken:
    return AccessToken(**dict(row))


class TokenService:
    def __init__(self, db: Pooled) -> None:
        self.db = db

    async def create(
        self,
        name: str,
        profiles: list[str],
        read_only: bool = False,
        expires_in: timedelta | None = None,
        rate_per_minute: int | None = None,
        max_running_jobs: int | None = None,
    ) -> tuple[AccessToken, str]:
        """Create a token; returns its record and the secret (shown once, never stored)."""
        if not name or not name.strip():
            raise InvalidArgument("A token needs a name.", "Pass --name, e.g. --name alice-laptop.")
        if name.strip().lower() in RESERVED_NAMES or name.strip().lower().startswith(IDENTITY_PREFIX):
            raise InvalidArgument(
                f"The token name '{name.strip()}' is reserved: it names the local owner in the audit log and "
                "in job limits.",
                "Pick another name, e.g. --name alice-laptop.",
            )
        if rate_per_minute is not None and rate_per_minute < 1:
            raise InvalidArgument("rate_per_minute must be 1 or more.", "Use e.g. 120.")
        if max_running_jobs is not None and max_running_jobs < 1:
            raise InvalidArgument("max_running_jobs must be 1 or more.", "Use e.g. 3.")
        if profiles:
            known = {r["name"] for r in await self.db.pool.fetch("SELECT name FROM profiles")}
            missing = [p for p in profiles if p not in known]
            if missing:
                raise NotFound(f"Profile(s) not found: {', '.join(missing)}.", f"Valid: {', '.join(sorted(known))}.")
        secret = PREFIX + secrets.token_urlsafe(32)
        try:
            row = await self.db.pool.fetchrow(
                "INSERT INTO access_tokens (name, token_hash, prefix, profiles, read_only, rate_per_minute, "
                "expires_at, max_running_jobs) "
                f"VALUES ($1, $2, $3, $4, $5, $6, now() + $7::interval, $8) RETURNING {COLUMNS}",
                name.strip(),
                hash_secret(secret),
                secret[:9],
                list(profiles),
                read_only,
                rate_per_minute,
                expires_in,
                max_running_jobs,
            )
        except asyncpg.UniqueViolationError:
            raise Conflict(f"A token named '{name}' already exists.", "Revoke it or pick another name.") from None
        return _to_token(row), secret

    async def list(self) -> list[AccessToken]:
        rows = await self.db.pool.fetch(f"SELECT {COLUMNS} FROM access_tokens ORDER BY created_at, name")
        return [_to_token(r) for r in rows]

    async def any_active(self) -> bool:
        """Whether any token is neither revoked nor expired."""
        return bool(await self.db.pool.fetchval(ACTIVE_TOKENS_SQL))

    async def revoke(self, token_id_or_name: str) -> AccessToken:
        try:
            tid: UUID | None = UUID(str(token_id_or_name))
        except ValueError:
            tid = None
        row = await self.db.pool.fetchrow(
            "UPDATE access_tokens SET revoked_at = coalesce(revoked_at, now()) "
            f"WHERE id = $1 OR name = $2 RETURNING {COLUMNS}",
            tid,
            str(token_id_or_name),
        )
        if row is None:
            raise NotFound(f"Token '{token_id_or_name}' not found.", "Use `archivist token list`.")
        return _to_token(row)

    async def verify(self, secret: str) -> AccessToken | None:
        """The token for this secret, or None when unknown, revoked or expired (checked in the DB each call)."""
        if not secret:
            return None
        row = await self.db.pool.fetchrow(
            f"UPDATE access_tokens SET last_used_at = now() WHERE token_hash = $1 AND revoked_at IS NULL "
            f"AND (expires_at IS NULL OR expires_at > now()) RETURNING {COLUMNS}",
            hash_secret(secret),
        )
        name = row["name"].strip().lower() if row is not None else ""
        if row is None or name in RESERVED_NAMES or name.startswith(IDENTITY_PREFIX):  # made before reserved
            return None
        return _to_token(row)


async def tokens_exist(settings: Settings) -> bool:
    """Whether any active token exists, on a connection of its own, before the services start (a server
    bound off loopback without one refuses to start); False before the tokens table is migrated."""
    conn = await asyncpg.connect(await resolve_dsn(settings))
    try:
        if not await conn.fetchval("SELECT to_regclass('access_tokens') IS NOT NULL"):
            return False
        return bool(await conn.fetchval(ACTIVE_TOKENS_SQL))
    finally:
        await conn.close()
