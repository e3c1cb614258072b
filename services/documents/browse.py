"""Read-only views for the web console: sources with counts, sortable document pages, a document's chunks."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from models import ChunkView, Document, Page
from services.access.scope import current_scope
from services.core.database import Database
from services.core.validation import check_page
from services.flags import FLAGS_COLUMN
from services.jobs.sources import last_run, last_runs

DOCUMENT_SORTS = {
    "title": "lower(title)",
    "created": "created_at",
    "updated": "updated_at",
    "chunks": "chunk_count",
    "length": "length(content)",
}
DOC_COLUMNS = (
    "id, source_id, title, url, document_type, content_hash, length(content) AS content_length, "
    "metadata, chunk_count, created_at, updated_at"
)


def scoped_ids() -> list[UUID] | None:
    """The sources the current call may see (services.access.scope), or None for all."""
    ids = current_scope().source_ids
    return None if ids is None else list(ids)


class BrowseService:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def source_rows(self, page: int = 1, per_page: int = 20) -> tuple[list[dict[str, Any]], int]:
        """Sources, newest first, each with documents/chunks counts, last update and last crawl."""
        page, per_page = check_page(page, per_page)
        rows = await self.db.pool.fetch(
            "SELECT s.id, s.title, s.source_type, s.url, s.created_at, s.updated_at, "
            "(SELECT count(*) FROM documents d WHERE d.source_id = s.id) AS documents_count, "
            "(SELECT coalesce(sum(chunk_count), 0) FROM documents d WHERE d.source_id = s.id) AS chunks_count, "
            "(SELECT max(updated_at) FROM documents d WHERE d.source_id = s.id) AS last_updated "
            "FROM sources s WHERE ($3::uuid[] IS NULL OR s.id = ANY($3)) "
            "ORDER BY s.created_at DESC, s.id LIMIT $1 OFFSET $2",
            per_page,
            (page - 1) * per_page,
            scoped_ids(),
        )
        total = await self.db.pool.fetchval(
            "SELECT count(*) FROM sources WHERE ($1::uuid[] IS NULL OR id = ANY($1))", scoped_ids()
        )
        crawled = await last_runs(self.db.pool, [r["id"] for r in rows])
        return [{**dict(r), "last_crawl": crawled.get(r["id"])} for r in rows], total

    async def documents(
        self, source_id: UUID, page: int = 1, per_page: int = 20, sort: str = "created", descending: bool = False
    ) -> Page[Document]:
        page, per_page = check_page(page, per_page)
        order = DOCUMENT_SORTS.get(sort, "created_at")
        direction = "DESC" if descending else "ASC"
        rows, total = await self.db.fetch_page(
            DOC_COLUMNS, "documents WHERE source_id = $1", f"{order} {direction}, id", [source_id], page, per_page
        )
        return Page[Document](
            items=[Document(**dict(r)) for r in rows], total_count=total, page=page, per_page=per_page
        )

    async def chunks(self, document_id: UUID, limit: int = 200) -> list[ChunkView]:
        rows = await self.db.pool.fetch(
            f"SELECT id, document_id, chunk_index, text, char_start, char_end, heading_path, {FLAGS_COLUMN} "
            "FROM chunks c WHERE document_id = $1 ORDER BY chunk_index LIMIT $2",
            document_id,
            limit,
        )
        return [ChunkView(**dict(r)) for r in rows]

    async def last_crawl(self, source_id: UUID) -> datetime | None:
        return await last_run(self.db.pool, source_id)

    async def source_choices(self, limit: int = 500) -> list[dict[str, Any]]:
        """Every source's id and title (for pickers), by title."""
        rows = await self.db.pool.fetch(
            "SELECT id, title FROM sources WHERE ($2::uuid[] IS NULL OR id = ANY($2)) "
            "ORDER BY lower(title), id LIMIT $1",
            limit,
            scoped_ids(),
        )
        return [dict(r) for r in rows]
