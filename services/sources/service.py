"""Sources: named collections of documents (finding them by title: services/sources/titles.py)."""

from __future__ import annotations

import builtins
from typing import Any
from uuid import UUID

import asyncpg

from models import Page, Source, SourceStats
from services.access.job_limits import scoped_ids
from services.access.scope import admit, current_scope
from services.core.database import Database
from services.core.errors import Conflict, InvalidArgument, NotFound
from services.core.validation import check_page, clean_text, parse_uuid, require_text
from services.jobs import sources as source_jobs
from services.sources.origin import describe
from services.sources.titles import IN_SCOPE, SOURCE_COLUMNS, conflict, lock_title, named, visible_identity

SOURCE_TYPES = ("upload", "crawl", "api", "folder", "git")
LIST_HINT = "Use manage_source(action='list') to see available sources."
#: a collision inside the caller's own namespace with a source it cannot see (one the owner took out of
#: its profile): refused without naming it
HIDDEN_TWIN = "A source titled '{title}' with this url and version was already created under this profile."


def _check_source_type(source_type: str) -> str:
    if source_type not in SOURCE_TYPES:
        raise InvalidArgument(f"Invalid source_type '{source_type}'.", f"Use one of: {', '.join(SOURCE_TYPES)}.")
    return source_type


def check_version(version: str | None) -> str | None:
    """A version label as stored: trimmed, at most 100 characters; empty means none."""
    if version is None or not str(version).strip():
        return None
    version = str(version).strip()
    if len(version) > 100:
        raise InvalidArgument("version is longer than 100 characters.", "Use a version like '3.11' or '2.1.0'.")
    return version


def _to_source(row: asyncpg.Record) -> Source:
    return Source(**dict(row))


async def _insert(
    conn: asyncpg.Connection,
    title: str,
    description: str | None,
    url: str | None,
    source_type: str,
    metadata: dict[str, Any] | None,
    version: str | None,
) -> asyncpg.Record:
    """A new source in the caller's namespace; the unique index fires only for a source of that same
    namespace the caller cannot see (every visible one was checked first)."""
    try:
        return await conn.fetchrow(
            f"INSERT INTO sources (title, description, url, source_type, metadata, version, namespace) "
            f"VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {SOURCE_COLUMNS}",
            *clean_text((title, description, url, source_type, metadata or {}, version)),
            current_scope().namespace,
        )
    except asyncpg.UniqueViolationError:
        raise Conflict(HIDDEN_TWIN.format(title=title[:200]), "Give the new source a different title.") from None


async def join_first_profile(conn: asyncpg.Connection, source_id: UUID) -> None:
    """A source created while profiles are selected joins the first of them (for a token: its first
    profile), and the current call may use it at once."""
    scope = current_scope()
    if scope.restricted and scope.profiles:
        await conn.execute(
            "UPDATE profiles SET source_ids = array_append(source_ids, $2), updated_at = now() "
            "WHERE name = $1 AND NOT ($2 = ANY(source_ids))",
            scope.profiles[0],
            source_id,
        )
        admit(source_id)


class SourceService:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(
        self,
        title: str | None,
        description: str | None = None,
        url: str | None = None,
        source_type: str = "upload",
        metadata: dict[str, Any] | None = None,
        version: str | None = None,
    ) -> Source:
        """A new source; CONFLICT (naming it) when one the caller can see has the same title (any case),
        url and version. Another tenant's source under that title is no conflict (services/sources/titles.py)."""
        title = require_text(clean_text(title), "title", max_length=500)
        version = check_version(clean_text(version))
        _check_source_type(source_type)
        async with self.db.pool.acquire() as conn, conn.transaction():
            await lock_title(conn, title)
            seen = await visible_identity(conn, title, clean_text(url), version)
            if seen:
                raise conflict(seen[0])
            row = await _insert(conn, title, description, url, source_type, metadata, version)
            await join_first_profile(conn, row["id"])
        return _to_source(row)

    async def get(self, source_id: str | UUID | None) -> Source:
        sid = parse_uuid(source_id, "source_id", LIST_HINT)
        row = await self.db.pool.fetchrow(f"SELECT {SOURCE_COLUMNS} FROM sources WHERE id = $1", sid)
        if row is None or not current_scope().allows(sid):
            raise NotFound(f"Source not found: {sid}", LIST_HINT)
        return _to_source(row)

    async def find_by_title(self, title: str) -> Source | None:
        """The caller's source `title` names (see `source_titles.named`), or None."""
        row = await named(self.db.pool, title)
        return _to_source(row) if row else None

    async def resolve(self, reference: str | UUID) -> Source:
        """A source named by its id or its title (exact title first, then any case; the oldest wins),
        within the caller's scope: what `--source` accepts on the command line. CONFLICT when two sources
        the caller can see share the title, url and version."""
        text = str(reference).strip()
        try:
            return await self.get(UUID(text))
        except ValueError:
            pass
        row = await named(self.db.pool, text)
        if row is None:
            raise NotFound(f"No source is named or numbered '{text[:200]}'.", LIST_HINT)
        return _to_source(row)

    async def get_or_create(
        self, title: str, source_type: str = "upload", url: str | None = None, must_exist: bool = False
    ) -> tuple[Source, bool]:
        """The source this title (any case) names in the caller's scope (`source_titles.named`), or a new
        one in its namespace; the flag says whether it was created. Atomic across concurrent calls and
        processes (an advisory lock on the title). With `must_exist` (a write's `source_must_exist`), a
        title naming no source the caller can see is NOT_FOUND: a mistyped title creates nothing."""
        title = require_text(clean_text(title), "title", max_length=500)
        row = await named(self.db.pool, title)  # the common case: it exists (no lock)
        if row is not None:
            return _to_source(row), False
        if must_exist:
            raise NotFound(
                f"No source titled '{title[:200]}' (source_must_exist is set, so none was created).",
                LIST_HINT + " Or leave source_must_exist out to create it.",
            )
        async with self.db.pool.acquire() as conn, conn.transaction():
            await lock_title(conn, title)
            row = await named(conn, title)
            if row is not None:
                return _to_source(row), False
            row = await _insert(conn, title, None, url, _check_source_type(source_type), None, None)
            await join_first_profile(conn, row["id"])
        return _to_source(row), True

    async def origin(self, source: Source) -> dict[str, Any]:
        """Its kind, origin and last sync (a git commit, a spec version); a login's variable names only."""
        return await describe(self.db.pool, source)

    async def stats(self, source_id: UUID) -> SourceStats:
        row = await self.db.pool.fetchrow(
            "SELECT count(*) AS documents_count, coalesce(sum(chunk_count), 0) AS chunks_count, "
            "max(updated_at) AS last_updated, (SELECT count(*) FROM chunks WHERE source_id = $1 "
            "AND embedding IS NULL) AS chunks_pending, (SELECT count(*) FROM chunks WHERE source_id = $1 "
            "AND cardinality(flags) > 0) AS chunks_flagged, (SELECT count(*) FROM chunks WHERE source_id = $1 "
            "AND flags IS NULL) AS chunks_unscanned, (SELECT coalesce(array_agg(title ORDER BY created_at, id), "
            "'{}') FROM (SELECT title, created_at, id FROM documents WHERE source_id = $1 "
            "ORDER BY created_at, id LIMIT 5) s) AS sample_documents FROM documents WHERE source_id = $1",
            source_id,
        )
        return SourceStats(**dict(row))

    async def list(self, page: int = 1, per_page: int = 10, title: str | None = None) -> Page[Source]:
        """Newest first; `title` keeps sources whose title contains it (any case)."""
        page, per_page = check_page(page, per_page)
        conditions: builtins.list[str] = []
        params: builtins.list[object] = []
        scoped = scoped_ids()
        if scoped is not None:
            params.append(scoped)
            conditions.append(f"id = ANY(${len(params)})")
        if title and title.strip():
            params.append("%" + title.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
            conditions.append(f"title ILIKE ${len(params)}")
        where = "sources WHERE " + " AND ".join(conditions) if conditions else "sources"
        rows, total = await self.db.fetch_page(SOURCE_COLUMNS, where, "created_at DESC, id", params, page, per_page)
        return Page[Source](items=[_to_source(r) for r in rows], total_count=total, page=page, per_page=per_page)

    async def update(
        self,
        source_id: str | UUID | None,
        title: str | None = None,
        description: str | None = None,
        url: str | None = None,
        source_type: str | None = None,
        metadata: dict[str, Any] | None = None,
        version: str | None = None,
    ) -> Source:
        sid = parse_uuid(source_id, "source_id", LIST_HINT)
        current_scope().check_write("Updating a source")
        if not current_scope().allows(sid):
            raise NotFound(f"Source not found: {sid}", LIST_HINT)
        if all(v is None for v in (title, description, url, source_type, metadata, version)):
            raise InvalidArgument("Nothing to update.", "Provide at least one of title, description, url, source_type.")
        if title is not None:
            title = require_text(title, "title", max_length=500)
        if source_type is not None:
            _check_source_type(source_type)
        values = clean_text((title, description, url, source_type, metadata, check_version(version)))
        async with self.db.pool.acquire() as conn, conn.transaction():
            if any(v is not None for v in (title, url, version)):
                title = await self._check_identity(conn, sid, values[0], values[2], values[5])
            try:
                row = await conn.fetchrow(
                    f"UPDATE sources SET title = coalesce($2, title), description = coalesce($3, description), "
                    f"url = coalesce($4, url), source_type = coalesce($5, source_type), "
                    f"metadata = metadata || coalesce($6, '{{}}'::jsonb), version = coalesce($7, version), "
                    f"updated_at = now() WHERE id = $1 RETURNING {SOURCE_COLUMNS}",
                    sid,
                    *values,
                )
            except asyncpg.UniqueViolationError:  # a source of its namespace the caller cannot see
                raise Conflict(HIDDEN_TWIN.format(title=str(title)[:200]), "Choose a different title.") from None
        if row is None:
            raise NotFound(f"Source not found: {sid}", LIST_HINT)
        return _to_source(row)

    @staticmethod
    async def _check_identity(
        conn: asyncpg.Connection, sid: UUID, title: str | None, url: str | None, version: str | None
    ) -> str:
        """CONFLICT (naming it) when a source the caller can see already has the identity this update
        gives `sid`; another tenant's source with it is no conflict. Returns the title it will have."""
        current = await conn.fetchrow("SELECT title, url, version FROM sources WHERE id = $1", sid)
        if current is None:
            raise NotFound(f"Source not found: {sid}", LIST_HINT)
        new_title = title if title is not None else current["title"]
        await lock_title(conn, new_title)
        seen = await visible_identity(
            conn,
            new_title,
            url if url is not None else current["url"],
            version if version is not None else current["version"],
            exclude=sid,
        )
        if seen:
            raise conflict(seen[0])
        return str(new_title)

    async def delete(self, source_id: str | UUID | None) -> dict[str, Any]:
        """Delete a source and (by cascade) its documents and chunks; returns what was removed."""
        sid = parse_uuid(source_id, "source_id", LIST_HINT)
        current_scope().check_write("Deleting a source")
        if not current_scope().allows(sid):
            raise NotFound(f"Source not found: {sid}", LIST_HINT)
        async with self.db.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow("SELECT title FROM sources WHERE id = $1 FOR UPDATE", sid)
            if row is None:
                raise NotFound(f"Source not found: {sid}", LIST_HINT)
            counts = await conn.fetchrow(
                "SELECT count(*) AS documents, coalesce(sum(chunk_count), 0) AS chunks "
                "FROM documents WHERE source_id = $1",
                sid,
            )
            await source_jobs.delete_of_source(conn, sid)  # its jobs go with it
            await conn.execute("DELETE FROM sources WHERE id = $1", sid)
        return {
            "source_id": str(sid),
            "title": row["title"],
            "documents_deleted": counts["documents"],
            "chunks_deleted": counts["chunks"],
        }

    async def discard_if_empty(self, source_id: UUID) -> bool:
        """Remove a source that holds no document and no job (one created for a write that failed)."""
        async with self.db.pool.acquire() as conn, conn.transaction():
            # the row locked first: a document or job written meanwhile waits for this transaction
            if await conn.fetchval("SELECT id FROM sources WHERE id = $1 FOR UPDATE", source_id) is None:
                return False
            if await source_jobs.has_job(conn, source_id):
                return False
            removed = await conn.fetchval(
                "DELETE FROM sources s WHERE s.id = $1 "
                "AND NOT EXISTS (SELECT 1 FROM documents d WHERE d.source_id = s.id) RETURNING s.id",
                source_id,
            )
        return removed is not None

    async def counts(self, source_ids: builtins.list[UUID]) -> dict[UUID, dict[str, int]]:
        """documents_count and chunks_count of several sources in one query (sources without any omitted)."""
        rows = await self.db.pool.fetch(
            "SELECT source_id, count(*) AS documents_count, coalesce(sum(chunk_count), 0) AS chunks_count "
            "FROM documents WHERE source_id = ANY($1::uuid[]) GROUP BY source_id",
            source_ids,
        )
        return {
            r["source_id"]: {"documents_count": r["documents_count"], "chunks_count": r["chunks_count"]} for r in rows
        }

    async def titles(self, source_ids: builtins.list[UUID]) -> dict[UUID, str]:
        """The titles of the sources among `source_ids` the caller may see (one query)."""
        scope = scoped_ids()
        rows = await self.db.pool.fetch(
            f"SELECT id, title FROM sources WHERE id = ANY($1::uuid[]) AND {IN_SCOPE}", source_ids, scope
        )
        return {r["id"]: r["title"] for r in rows}
