"""Reading documents: get, content windows, single chunks, listing, links and the page graph."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from models import ChunkView, ContentWindow, Document, Page
from services.access.scope import current_scope
from services.core.database import Database
from services.core.errors import InvalidArgument, NotFound
from services.core.validation import check_page, check_start, parse_uuid
from services.documents.links import link_graph, scoped_links
from services.documents.text import (
    DOC_HINT,
    DOCUMENT_COLUMNS,
    EMBEDDING_PENDING,
    WINDOW_SIZE,
    _to_document,
)
from services.flags import FLAGS_COLUMN
from services.sources.service import SourceService

#: document list orders (manage_document list `order`): None is the oldest first, as always
LIST_ORDERS = {None: "created_at, id", "oldest": "created_at, id", "newest": "created_at DESC, id DESC"}


class Reader:
    """Reading documents within the caller's scope (part of DocumentService)."""

    def __init__(self, db: Database, sources: SourceService) -> None:
        self.db = db
        self.sources = sources

    async def get(self, document_id: str | UUID | None) -> Document:
        did = parse_uuid(document_id, "document_id", DOC_HINT)
        row = await self.db.pool.fetchrow(
            f"SELECT {DOCUMENT_COLUMNS}, {EMBEDDING_PENDING} FROM documents WHERE id = $1", did
        )
        if row is None or not current_scope().allows(row["source_id"]):
            raise NotFound(f"Document not found: {did}", DOC_HINT)
        return _to_document(row)

    async def read_window(self, document_id: UUID, offset: int = 0, size: int = WINDOW_SIZE) -> ContentWindow:
        if offset < 0:
            raise InvalidArgument(f"offset must be 0 or more (got {offset}).", "Use offset=0 to read from the start.")
        row = await self.db.pool.fetchrow(
            "SELECT substr(content, $2 + 1, $3) AS text, length(content) AS total FROM documents WHERE id = $1",
            document_id,
            offset,
            size,
        )
        if row is None:
            raise NotFound(f"Document not found: {document_id}", DOC_HINT)
        total = row["total"]
        if offset > total:
            raise InvalidArgument(
                f"offset {offset} is past the end of the document ({total} characters).",
                "Use an offset below the document's content_length.",
            )
        end = offset + len(row["text"])
        return ContentWindow(
            offset=offset, text=row["text"], next_offset=end if end < total else None, total_length=total
        )

    async def get_chunk(self, document_id: UUID, chunk_index: int) -> ChunkView:
        row = await self.db.pool.fetchrow(
            "SELECT id, document_id, chunk_index, text, char_start, char_end, heading_path, page_start, page_end, "
            f"{FLAGS_COLUMN} FROM chunks c WHERE document_id = $1 AND chunk_index = $2",
            document_id,
            chunk_index,
        )
        if row is None:
            count = await self.db.pool.fetchval("SELECT chunk_count FROM documents WHERE id = $1", document_id)
            if count is None:
                raise NotFound(f"Document not found: {document_id}", DOC_HINT)
            raise InvalidArgument(
                f"chunk_index {chunk_index} is out of range: the document has {count} chunks.",
                f"Use a chunk_index from 0 to {max(count - 1, 0)}.",
            )
        return ChunkView(**dict(row))

    async def list(
        self,
        source_id: str | UUID | None,
        page: int = 1,
        per_page: int = 10,
        order: str | None = None,
        start: int | str | None = None,
    ) -> Page[Document]:
        """A source's documents (every source for the unrestricted owner), oldest first, or newest first
        with order="newest"; from row `start` when given (a client paging by offset), else by `page`."""
        page, per_page = check_page(page, per_page)
        row_start = check_start(start, page)
        if order not in LIST_ORDERS:
            raise InvalidArgument(f"Invalid order {str(order)[:40]!r}.", "Use order='newest' or order='oldest'.")
        sid = None
        if source_id:
            sid = (await self.sources.get(source_id)).id
        elif current_scope().source_ids is not None:
            raise InvalidArgument("source_id is required under a profile scope.", "Pass one of your sources' ids.")
        rows, total = await self.db.fetch_page(
            f"{DOCUMENT_COLUMNS}, {EMBEDDING_PENDING}",
            "documents WHERE $1::uuid IS NULL OR source_id = $1",
            LIST_ORDERS[order],
            [sid],
            page,
            per_page,
            start=row_start,
        )
        items = [_to_document(r) for r in rows]
        return Page[Document](items=items, total_count=total, page=page, per_page=per_page, start=row_start)

    async def links(self, document_id: UUID, limit: int = 20) -> dict[str, Any] | None:
        """Outlinks and backlinks inside the caller's scope (None when the document has neither)."""
        return await scoped_links(self.db.pool, document_id, current_scope(), limit)

    async def graph(self, document_id: UUID) -> dict[str, Any]:
        """The document's one-hop page graph inside the caller's scope (services/documents/links.py)."""
        return await link_graph(self.db.pool, document_id, current_scope())

    async def content(self, document_id: UUID) -> str:
        return await self.db.pool.fetchval("SELECT content FROM documents WHERE id = $1", document_id)
