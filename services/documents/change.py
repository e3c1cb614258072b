"""Changing documents: update (an atomic re-chunk swap, then re-embedding), outlinks, delete."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg

from models import IngestResult
from services.access.scope import current_scope
from services.chunking.base import Chunk
from services.code.lines import write_lines
from services.code.symbol_store import write_symbols
from services.core.database import Database
from services.core.errors import Conflict, InvalidArgument, NotFound
from services.core.validation import parse_uuid
from services.documents.ingest import Ingestor
from services.documents.links import content_links, write_links
from services.documents.read import Reader
from services.documents.text import (
    DOC_HINT,
    check_metadata,
    content_hash,
    guess_text_type,
)


class Changer:
    """Updating and deleting documents (part of DocumentService): reads through the Reader, re-chunks and
    stores through the Ingestor."""

    def __init__(self, db: Database, ingestor: Ingestor, reader: Reader) -> None:
        self.db = db
        self.ingestor = ingestor
        self.reader = reader

    async def update(
        self,
        document_id: str | UUID | None,
        title: str | None = None,
        url: str | None = None,
        metadata: dict[str, Any] | None = None,
        content: str | None = None,
        embed: bool = True,
    ) -> IngestResult:
        """Merge title/url/metadata; new content (or a new title, which is embedded with every chunk)
        re-chunks, swapped in one transaction (readers see the old document or the new one, keyword-searchable
        at once, never neither), then re-embeds (`embed`) or leaves that to the backlog runner."""
        current = await self.reader.get(document_id)
        if all(v is None for v in (title, url, metadata, content)):
            raise InvalidArgument("Nothing to update.", "Provide title, url, metadata or content.")
        if content is not None and not content.strip():
            raise InvalidArgument("content must not be empty.", "Delete the document instead of emptying it.")
        new_title = title.strip()[:500] if title and title.strip() else current.title
        reindex = (content is not None and content_hash(content) != current.content_hash) or (
            new_title != current.title
        )
        chunks: list[Chunk] = []
        doc_type = current.document_type
        if reindex:
            text = content if content is not None else await self.reader.content(current.id)
            doc_type = self._updated_type(current.document_type, content)
            chunks = self.ingestor.chunk(text, doc_type, current.metadata)
        vectors = (await self.ingestor.embed_chunks([(new_title, chunks)]))[0] if reindex and embed else None
        async with self.db.pool.acquire() as conn, conn.transaction():
            locked = await conn.fetchval("SELECT id FROM documents WHERE id = $1 FOR UPDATE", current.id)
            if locked is None:
                raise NotFound(f"Document not found: {current.id}", DOC_HINT)
            new_content = content if reindex and content is not None else None
            try:  # one statement: the row stays locked for as few round trips as possible
                await conn.execute(
                    "UPDATE documents SET title = $2, url = coalesce($3, url), metadata = metadata || $4, "
                    "updated_at = now(), content = coalesce($5, content), content_hash = coalesce($6, content_hash), "
                    "document_type = coalesce($7, document_type), chunk_count = coalesce($8, chunk_count) "
                    "WHERE id = $1",
                    current.id,
                    new_title,
                    url,
                    check_metadata(metadata),
                    new_content,
                    None if new_content is None else content_hash(new_content),
                    doc_type if new_content is not None else None,
                    len(chunks) if reindex else None,
                )
            except asyncpg.UniqueViolationError:
                raise Conflict(
                    f"Another document in this source already has url {url}.",
                    "Use a different url, or update that document instead.",
                ) from None
            if reindex:
                evidence = {**current.metadata, **(metadata or {})}  # hidden-text marks of the page
                await self.ingestor.write_chunks(
                    conn, current.id, current.source_id, new_title, chunks, vectors, evidence
                )
                if new_content is not None:  # the line index follows the text (services/code/lines.py)
                    await write_lines(conn, current.id, current.source_id, new_content, evidence)
                if new_content is not None:  # the symbol table follows the text (services/code)
                    await write_symbols(conn, current.id, current.source_id, new_content, evidence)
            links = content_links(new_content, doc_type, url or current.url) if new_content is not None else None
            if links is not None:  # the new content's links replace the old
                await write_links(conn, current.id, current.source_id, links)
        if reindex:
            await self.ingestor.settle_embeddings([current.id], embed)
        return IngestResult(
            document=await self.reader.get(current.id),
            status="updated",
            chunks_created=len(chunks) if reindex else 0,
        )

    async def set_links(self, conn: asyncpg.Connection, document_id: UUID, source_id: UUID, urls: list[str]) -> None:
        """Replace a document's outlinks (absolute, normalised URLs)."""
        await write_links(conn, document_id, source_id, urls)

    @staticmethod
    def _updated_type(current_type: str, content: str | None) -> str:
        if content is not None and current_type in ("text", "markdown"):
            return guess_text_type(content)
        return current_type

    async def delete(self, document_id: str | UUID | None) -> dict[str, Any]:
        did = parse_uuid(document_id, "document_id", DOC_HINT)
        async with self.db.pool.acquire() as conn, conn.transaction():
            source_id = await conn.fetchval("SELECT source_id FROM documents WHERE id = $1 FOR UPDATE", did)
            if source_id is None or not current_scope().allows(source_id):
                raise NotFound(f"Document not found: {did}", DOC_HINT)  # out of scope reads as missing
            row = await conn.fetchrow(
                "DELETE FROM documents WHERE id = $1 RETURNING title, source_id, chunk_count", did
            )
        # After the commit, as ingestion does: the source's row is not held locked across a round trip.
        await self.db.pool.execute("UPDATE sources SET updated_at = now() WHERE id = $1", row["source_id"])
        return {
            "document_id": str(did),
            "title": row["title"],
            "source_id": str(row["source_id"]),
            "chunks_deleted": row["chunk_count"],
        }
