"""Profiles: named, ordered sets of sources with default search settings, output settings and flags
(what each may hold is checked in services/access/profile_settings.py, for every door)."""

from __future__ import annotations

import builtins
import logging
from pathlib import Path
from typing import Any
from uuid import UUID

import asyncpg

from models.access import Profile
from services.access.profile_settings import OutputSettings, check_name, check_values, output_settings_of
from services.access.scope import Scope
from services.core.database import Database
from services.core.errors import Conflict, InvalidArgument, NotFound
from services.core.settings import Settings

logger = logging.getLogger(__name__)
FIELDS = (
    "description",
    "source_ids",
    "search_type",
    "match_count",
    "similarity_threshold",
    "keyword_weight",
    "read_only",
    "enabled",
    "allowed_paths",
    "exclude_flagged",
    "snippet_chars",
    "hit_fields",
)
MAX_PATHS = 50
COLUMNS = "name, " + ", ".join(FIELDS) + ", created_at, updated_at"


def _to_profile(row: asyncpg.Record) -> Profile:
    return Profile(**dict(row))


def check_paths(paths: list[str] | None) -> list[str] | None:
    """A profile's allowed paths as absolute, resolved directory names (None stays None: not set).
    Whether they lie inside the server's ARCHIVIST_ALLOWED_PATHS is decided when a file is read
    (services/access/paths.caller_roots), since that setting belongs to the server, not to the profile."""
    if paths is None:
        return None
    if isinstance(paths, str) or len(paths) > MAX_PATHS:
        raise InvalidArgument(
            f"allowed_paths must be a list of at most {MAX_PATHS} directories.", "Name each directory once."
        )
    resolved: list[str] = []
    for raw in paths:
        if not isinstance(raw, str) or not raw.strip() or "\x00" in raw:
            raise InvalidArgument(f"Invalid allowed path {str(raw)[:200]!r}.", "Name a directory, e.g. /srv/kb/team-a.")
        path = Path(raw.strip()).expanduser()
        if not path.is_absolute():
            raise InvalidArgument(
                f"Allowed path {raw[:200]!r} is not absolute.", "Name the directory from the root, e.g. /srv/kb/team-a."
            )
        resolved.append(str(path.resolve()))
    return list(dict.fromkeys(resolved))


class ProfileService:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def list(self) -> list[Profile]:
        rows = await self.db.pool.fetch(f"SELECT {COLUMNS} FROM profiles ORDER BY name")
        return [_to_profile(r) for r in rows]

    async def get(self, name: str) -> Profile:
        row = await self.db.pool.fetchrow(f"SELECT {COLUMNS} FROM profiles WHERE name = $1", name)
        if row is None:
            names = [p.name for p in await self.list()]
            raise NotFound(f"Profile '{name}' not found.", f"Valid profiles: {', '.join(names) or '(none)'}.")
        return _to_profile(row)

    async def _check_sources(self, source_ids: builtins.list[Any]) -> builtins.list[UUID]:
        try:
            ids = [UUID(str(s)) for s in source_ids]
        except ValueError as exc:
            raise InvalidArgument(f"Invalid source id: {exc}.", "Use ids from manage_source(action='list').") from None
        if ids:
            found = {r["id"] for r in await self.db.pool.fetch("SELECT id FROM sources WHERE id = ANY($1)", ids)}
            missing = [str(i) for i in ids if i not in found]
            if missing:
                raise NotFound(f"Source(s) not found: {', '.join(missing)}.", "Use manage_source(action='list').")
        return list(dict.fromkeys(ids))

    @staticmethod
    def _check_fields(fields: dict[str, Any]) -> dict[str, Any]:
        """The fields checked and normalised (services/access/profile_settings.check_values)."""
        unknown = set(fields) - set(FIELDS)
        if unknown:
            raise InvalidArgument(
                f"Unknown profile field(s): {', '.join(sorted(unknown))}.", f"Use: {', '.join(FIELDS)}."
            )
        return check_values(fields)

    async def create(
        self,
        name: str,
        description: str = "",
        source_ids: builtins.list[UUID] | None = None,
        search_type: str | None = None,
        match_count: int | None = None,
        similarity_threshold: float | None = None,
        keyword_weight: float | None = None,
        read_only: bool = False,
        enabled: bool = True,
        allowed_paths: builtins.list[str] | None = None,
        exclude_flagged: bool = False,
        snippet_chars: int | None = None,
        hit_fields: builtins.list[str] | None = None,
    ) -> Profile:
        check_name(name)
        fields = dict(
            description=description or "",
            source_ids=await self._check_sources(source_ids or []),
            search_type=search_type,
            match_count=match_count,
            similarity_threshold=similarity_threshold,
            keyword_weight=keyword_weight,
            read_only=read_only,
            enabled=enabled,
            allowed_paths=check_paths(allowed_paths),
            exclude_flagged=bool(exclude_flagged),
            snippet_chars=snippet_chars,
            hit_fields=hit_fields,
        )
        fields = self._check_fields(fields)
        values = ", ".join(f"${i}" for i in range(1, len(FIELDS) + 2))
        try:
            row = await self.db.pool.fetchrow(
                f"INSERT INTO profiles (name, {', '.join(FIELDS)}) VALUES ({values}) RETURNING {COLUMNS}",
                name,
                *[fields[f] for f in FIELDS],
            )
        except asyncpg.UniqueViolationError:
            raise Conflict(f"Profile '{name}' already exists.", "Use update, or pick another name.") from None
        return _to_profile(row)

    async def update(self, name: str, **fields: Any) -> Profile:
        """Change the given fields (None unsets a default; source_ids in search order)."""
        fields = self._check_fields(fields)
        if "source_ids" in fields:
            fields["source_ids"] = await self._check_sources(fields["source_ids"] or [])
        if "allowed_paths" in fields:  # None clears them (not set: no files)
            fields["allowed_paths"] = check_paths(fields["allowed_paths"])
        if not fields:
            return await self.get(name)
        sets = ", ".join(f"{k} = ${i + 2}" for i, k in enumerate(fields))
        row = await self.db.pool.fetchrow(
            f"UPDATE profiles SET {sets}, updated_at = now() WHERE name = $1 RETURNING {COLUMNS}",
            name,
            *fields.values(),
        )
        if row is None:
            await self.get(name)
        return _to_profile(row)

    async def delete(self, name: str) -> None:
        done = await self.db.pool.execute("DELETE FROM profiles WHERE name = $1", name)
        if done.endswith(" 0"):
            await self.get(name)

    async def add_source(self, name: str, source_id: UUID) -> None:
        """Append a source to a profile (a source created while profiles are selected joins the first)."""
        await self.db.pool.execute(
            "UPDATE profiles SET source_ids = array_append(source_ids, $2), updated_at = now() "
            "WHERE name = $1 AND NOT ($2 = ANY(source_ids))",
            name,
            source_id,
        )

    async def output_settings_for(self, scope: Scope, chosen: Profile | None = None) -> OutputSettings:
        """How a caller's hits are shaped (the hit shaper of search_knowledge_base calls this): the
        profile it searches as (`chosen`, the `profile=` argument), else its profiles' combined settings
        (profile_settings.output_settings_of); the defaults (every field, 1,000 characters) without one."""
        if chosen is not None:
            return output_settings_of([chosen])
        if not scope.profiles:
            return OutputSettings()
        rows = await self.db.pool.fetch(
            "SELECT snippet_chars, hit_fields FROM profiles WHERE name = ANY($1)", list(scope.profiles)
        )
        return output_settings_of([Profile.model_construct(**dict(r)) for r in rows])

    async def visible_names(self, scope: Scope) -> builtins.list[str]:
        """The enabled profiles a caller may name: its own when it is confined to profiles, else all."""
        names = [p.name for p in await self.list() if p.enabled]
        return names if scope.source_ids is None else [n for n in names if n in scope.profiles]

    def check_visible(self, scope: Scope, name: str) -> None:
        """A confined caller naming a profile not its own gets exactly the answer of an unknown name."""
        if scope.source_ids is not None and name not in scope.profiles:
            raise unknown_profile(name)

    async def scope_for(self, names: builtins.list[str], read_only: bool = False, who: str = "local") -> Scope:
        """The union of the named (enabled) profiles' sources; no names = every source (but not the
        local owner: services/access/identity.py says who that is). Unknown or disabled profile -> NotFound."""
        if not names:
            return Scope.unrestricted(who, read_only)
        profiles = {p.name: p for p in await self.list()}
        ids: set[UUID] = set()
        paths: dict[str, None] = {}
        ro, withheld = read_only, False
        for n in names:
            p = profiles.get(n)
            if p is None or not p.enabled:
                # no list of the valid names: a token holder learns nothing of other tenants' profiles
                raise unknown_profile(n)
            ids.update(p.source_ids)
            paths.update(dict.fromkeys(p.allowed_paths or ()))
            ro = ro or p.read_only
            withheld = withheld or p.exclude_flagged  # any of its profiles: flagged text is withheld
        return Scope.of_profiles(frozenset(ids), ro, list(names), who, tuple(paths), withheld)


def unknown_profile(name: str) -> NotFound:
    """The one answer for a profile that is unknown, disabled, or another tenant's."""
    return NotFound(f"Profile '{name}' is unknown or disabled.", "List profiles with `archivist profile list`.")


async def read_profile_notes(settings: Settings, names: list[str]) -> dict[str, str]:
    """The named (enabled) profiles' descriptions on a connection of its own: read at server start-up,
    before the models load. Empty when none are named or the database cannot be read."""
    if not names:
        return {}
    from services.core.database import resolve_dsn

    try:
        conn = await asyncpg.connect(await resolve_dsn(settings))
        try:
            rows = await conn.fetch("SELECT name, description FROM profiles WHERE name = ANY($1) AND enabled", names)
        finally:
            await conn.close()
    except Exception:
        logger.warning("could not read the selected profiles' descriptions", exc_info=True)
        return {}
    return {r["name"]: r["description"] for r in rows}
