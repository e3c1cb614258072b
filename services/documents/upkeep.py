"""What crawls and syncs do to the documents they hold, written here: only services/documents/ writes
the `documents` and `chunks` tables (tests/test_architecture.py).

- `known`: the document a source holds for a URL, with the validators of a conditional request;
- `refresh_validators`: same content, new ETag / Last-Modified (or extractor): kept for the next recrawl;
- `touch_fetched`: a page fetched again (200 or 304) was fetched now (services/documents/freshness.py);
- `move`: a file renamed (a folder or git sync) keeps its document: new URL, title and metadata, and its
  chunks' context follows the title, so nothing is re-embedded.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from services.core.database import Database
from services.documents.text import NewDocument, chunk_context
from services.pages import EXTRACTOR_VERSION

#: a chunk's context is its document's title and its heading path (chunk_context), rebuilt in SQL
RETITLE_CHUNKS = (
    "UPDATE chunks SET context = $2 || CASE WHEN cardinality(heading_path) > 0 "
    "THEN ' ' || array_to_string(heading_path, ' ') ELSE '' END WHERE document_id = $1"
)


@dataclass(frozen=True)
class KnownDocument:
    """The document a source already holds for a URL (its validators allow a conditional request)."""

    id: UUID
    content_hash: str
    chunk_count: int
    etag: str | None
    last_modified: str | None
    created_at: datetime
    updated_at: datetime
    document_type: str = ""
    extractor: str | None = None

    def validators(self) -> tuple[str | None, str | None]:
        """(ETag, Last-Modified) for a conditional request; none for an HTML page an older page
        pipeline extracted (a 304 would keep its old text)."""
        if self.document_type == "html" and self.extractor != EXTRACTOR_VERSION:
            return None, None
        return self.etag, self.last_modified


class Upkeep:
    """The writes crawls and syncs need on documents they already hold (see the module docstring)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def known(self, source_id: UUID | None, url: str) -> KnownDocument | None:
        row = await self.db.pool.fetchrow(
            "SELECT id, content_hash, chunk_count, created_at, updated_at, metadata->>'etag' AS etag, "
            "metadata->>'last_modified' AS last_modified, document_type, metadata->>'extractor' AS extractor "
            "FROM documents WHERE source_id = $1 AND url = $2",
            source_id,
            url,
        )
        return KnownDocument(**dict(row)) if row else None

    async def refresh_validators(self, document_id: UUID, validators: dict[str, Any]) -> None:
        """Merge new validators (etag, last_modified, crawl_root, extractor) into the document's metadata."""
        await self.db.pool.execute(
            "UPDATE documents SET metadata = metadata || $2 WHERE id = $1", document_id, validators
        )

    async def touch_fetched(self, document_id: UUID) -> None:
        """A web page fetched again: its `fetched_at` is now (files and text have none to refresh)."""
        await self.db.pool.execute(
            "UPDATE documents SET fetched_at = now() WHERE id = $1 "
            "AND documents_fetched(metadata) AND fetched_at IS DISTINCT FROM now()",
            document_id,
        )

    async def move(
        self,
        document_id: UUID,
        item: NewDocument,
        *,
        retitle: bool = True,
        conn: asyncpg.Connection | None = None,
    ) -> int:
        """Give a document the URL and metadata of `item` (and, with `retitle`, its title: the chunks'
        context follows). On `conn`: inside the caller's transaction (a sync moves its manifest row with
        it). Raises asyncpg.UniqueViolationError when another document of the source has that URL.
        Returns the document's chunk count."""
        if conn is None:
            async with self.db.pool.acquire() as own, own.transaction():
                return await self._move(own, document_id, item, retitle)
        return await self._move(conn, document_id, item, retitle)

    @staticmethod
    async def _move(conn: asyncpg.Connection, document_id: UUID, item: NewDocument, retitle: bool) -> int:
        if not retitle:
            chunks = await conn.fetchval(
                "UPDATE documents SET url = $2, metadata = metadata || $3 WHERE id = $1 RETURNING chunk_count",
                document_id,
                item.url,
                item.metadata or {},
            )
            return int(chunks or 0)
        chunks = await conn.fetchval(
            "UPDATE documents SET url = $2, title = $3, metadata = metadata || $4, updated_at = now() "
            "WHERE id = $1 RETURNING chunk_count",
            document_id,
            item.url,
            item.title,
            item.metadata or {},
        )
        await conn.execute(RETITLE_CHUNKS, document_id, chunk_context(item.title, []))
        return int(chunks or 0)
