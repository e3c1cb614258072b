"""Grants: which profiles a token of the team's identity provider reaches (issue 20).

`archivist profile grant NAME --group G | --subject S | --email-domain D [--write]` binds a claim to a
profile. A verified identity (services/access/oauth.py) reaches the union of the enabled profiles of
every grant it matches: a group in its groups claim, its `sub`, or the domain of its verified email.
It may write when its token carries the `archivist:write` scope or one matching grant says `--write`
(a read-only profile stays read-only). An identity that matches no grant reaches nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from services.access.oauth import Identity
from services.core.database import Database
from services.core.errors import InvalidArgument, NotFound

KINDS = ("group", "subject", "email_domain")


@dataclass(frozen=True)
class Grant:
    profile: str
    kind: str
    value: str
    write: bool


@dataclass(frozen=True)
class Reach:
    """What an identity's grants give it: enabled profiles (in name order) and whether one writes."""

    profiles: tuple[str, ...]
    write: bool


def check_grant(kind: str, value: str) -> str:
    if kind not in KINDS:
        raise InvalidArgument(f"Unknown grant kind {kind!r}.", f"Use one of: {', '.join(KINDS)}.")
    value = (value or "").strip()
    if not value:
        raise InvalidArgument(f"A {kind} grant needs a value.", "Pass e.g. --group engineering.")
    if kind == "email_domain":
        value = value.lower().lstrip("@")
        if "@" in value or "." not in value:
            raise InvalidArgument(f"Invalid email domain {value!r}.", "Pass the domain only, e.g. example.com.")
    return value


class GrantService:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def grant(self, profile: str, kind: str, value: str, write: bool = False) -> Grant:
        value = check_grant(kind, value)
        try:
            row = await self.db.pool.fetchrow(
                "INSERT INTO profile_grants (profile, kind, value, write) VALUES ($1, $2, $3, $4) "
                "ON CONFLICT (profile, kind, value) DO UPDATE SET write = EXCLUDED.write "
                "RETURNING profile, kind, value, write",
                profile,
                kind,
                value,
                write,
            )
        except asyncpg.ForeignKeyViolationError:
            raise NotFound(f"Profile '{profile}' not found.", "Create it: archivist profile create NAME.") from None
        return Grant(**dict(row))

    async def revoke(self, profile: str, kind: str, value: str) -> None:
        value = check_grant(kind, value)
        done = await self.db.pool.execute(
            "DELETE FROM profile_grants WHERE profile = $1 AND kind = $2 AND value = $3", profile, kind, value
        )
        if done.endswith(" 0"):
            raise NotFound(f"No {kind} grant {value!r} on profile '{profile}'.", "See `archivist profile grants`.")

    async def list(self, profile: str | None = None) -> list[Grant]:
        rows = await self.db.pool.fetch(
            "SELECT profile, kind, value, write FROM profile_grants WHERE $1::text IS NULL OR profile = $1 "
            "ORDER BY profile, kind, value",
            profile,
        )
        return [Grant(**dict(r)) for r in rows]

    async def reach(self, identity: Identity) -> Reach:
        """The enabled profiles this identity's grants reach, and whether one of them allows writes."""
        domain = identity.verified_email.rsplit("@", 1)[-1].lower() if identity.verified_email else None
        rows = await self.db.pool.fetch(
            "SELECT g.profile, bool_or(g.write) AS write FROM profile_grants g "
            "JOIN profiles p ON p.name = g.profile AND p.enabled "
            "WHERE (g.kind = 'group' AND g.value = ANY($1::text[])) "
            "OR (g.kind = 'subject' AND g.value = $2) OR (g.kind = 'email_domain' AND g.value = $3) "
            "GROUP BY g.profile ORDER BY g.profile",
            list(identity.groups),
            identity.subject,
            domain,
        )
        return Reach(tuple(r["profile"] for r in rows), any(r["write"] for r in rows))
