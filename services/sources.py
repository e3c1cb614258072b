"""Sources: named collections of documents."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg

from models import Page, Source, SourceStats
from services.database import Database
from services.errors import InvalidArgument, NotFound
from services.scope import current_scope
from services.validation import check_page, parse_uuid, require_text

SOURCE_TYPES = ("upload", "crawl", "api")
LIST_HINT = "Use manage_source(action='list') to see available sources."
SOURCE_COLUMNS = "id, title, description, url, source_type, status, metadata, created_at, updated_at"


def _check_source_type(source_type: str) -> str:
    if source_type not in SOURCE_TYPES:
        raise InvalidArgument(f"Invalid source_type '{source_type}'.", f"Use one of: {', '.join(SOURCE_TYPES)}.")
    return source_type


def _to_source(row: asyncpg.Record) -> Source:
    return Source(**dict(row))


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
    ) -> Source:
        title = require_text(title, "title", max_length=500)
        row = await self.db.pool.fetchrow(
            f"INSERT INTO sources (title, description, url, source_type, metadata) "
            f"VALUES ($1, $2, $3, $4, $5) RETURNING {SOURCE_COLUMNS}",
            title,
            description,
            url,
            _check_source_type(source_type),
            metadata or {},
        )
        return _to_source(row)

    async def get(self, source_id: str | UUID | None) -> Source:
        sid = parse_uuid(source_id, "source_id", LIST_HINT)
        row = await self.db.pool.fetchrow(f"SELECT {SOURCE_COLUMNS} FROM sources WHERE id = $1", sid)
        if row is None or not current_scope().allows(sid):
            raise NotFound(f"Source not found: {sid}", LIST_HINT)
        return _to_source(row)

    async def find_by_title(self, title: str) -> Source | None:
        row = await self.db.pool.fetchrow(
            f"SELECT {SOURCE_COLUMNS} FROM sources WHERE title = $1 ORDER BY created_at LIMIT 1", title
        )
        return _to_source(row) if row else None

    async def get_or_create(
        self, title: str, source_type: str = "upload", url: str | None = None
    ) -> tuple[Source, bool]:
        """The oldest source with this exact title, or a new one; the flag says whether it was created."""
        existing = await self.find_by_title(require_text(title, "title", max_length=500))
        if existing is not None:
            return existing, False
        return await self.create(title, url=url, source_type=source_type), True

    async def stats(self, source_id: UUID) -> SourceStats:
        row = await self.db.pool.fetchrow(
            "SELECT count(*) AS documents_count, coalesce(sum(chunk_count), 0) AS chunks_count, "
            "max(updated_at) AS last_updated FROM documents WHERE source_id = $1",
            source_id,
        )
        return SourceStats(**dict(row))

    async def list(self, page: int = 1, per_page: int = 10) -> Page[Source]:
        page, per_page = check_page(page, per_page)
        scoped = current_scope().source_ids
        where, params = ("sources WHERE id = ANY($1)", [list(scoped)]) if scoped is not None else ("sources", [])
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
    ) -> Source:
        sid = parse_uuid(source_id, "source_id", LIST_HINT)
        current_scope().check_write("Updating a source")
        if not current_scope().allows(sid):
            raise NotFound(f"Source not found: {sid}", LIST_HINT)
        if all(v is None for v in (title, description, url, source_type, metadata)):
            raise InvalidArgument("Nothing to update.", "Provide at least one of title, description, url, source_type.")
        if title is not None:
            title = require_text(title, "title", max_length=500)
        if source_type is not None:
            _check_source_type(source_type)
        row = await self.db.pool.fetchrow(
            f"UPDATE sources SET title = coalesce($2, title), description = coalesce($3, description), "
            f"url = coalesce($4, url), source_type = coalesce($5, source_type), "
            f"metadata = metadata || coalesce($6, '{{}}'::jsonb), updated_at = now() "
            f"WHERE id = $1 RETURNING {SOURCE_COLUMNS}",
            sid,
            title,
            description,
            url,
            source_type,
            metadata,
        )
        if row is None:
            raise NotFound(f"Source not found: {sid}", LIST_HINT)
        return _to_source(row)

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
            await conn.execute("DELETE FROM sources WHERE id = $1", sid)
        return {
            "source_id": str(sid),
            "title": row["title"],
            "documents_deleted": counts["documents"],
            "chunks_deleted": counts["chunks"],
        }
