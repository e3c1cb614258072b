"""Ingestion: chunk + embed outside transactions, then store each document atomically (chunks by COPY)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg

from models import Document, IngestResult
from services.chunking import get_chunker
from services.chunking.base import Chunk
from services.database import Database
from services.documents.text import (
    CHUNK_COLUMNS,
    DOCUMENT_COLUMNS,
    NewDocument,
    _to_document,
    check_metadata,
    chunk_context,
    content_hash,
    embedding_text,
)
from services.embeddings import embed_documents_async
from services.embeddings.base import Embedder
from services.errors import InvalidArgument
from services.settings import Settings
from services.sources import SourceService


class IngestMixin:
    """Part of DocumentService (services/documents/service.py)."""

    db: Database
    sources: SourceService
    embedder: Embedder
    settings: Settings

    async def prepare_chunks(
        self, title: str, content: str, document_type: str, metadata: dict[str, Any] | None = None
    ) -> tuple[list[Chunk], list[Any]]:
        """Chunk (by the document's kind) and embed, outside any transaction: embedding is the slow part."""
        chunks = get_chunker(self.settings, document_type=document_type, metadata=metadata).chunk(content)
        texts = [embedding_text(title, c.heading_path, c.text) for c in chunks]
        vectors = await embed_documents_async(self.embedder, texts) if texts else []
        return chunks, list(vectors)

    async def _write_chunks(
        self,
        conn: asyncpg.Connection,
        document_id: UUID,
        source_id: UUID,
        title: str,
        chunks: list[Chunk],
        vectors: list[Any],
    ) -> None:
        await conn.execute("DELETE FROM chunks WHERE document_id = $1", document_id)
        records = [
            (
                document_id,
                source_id,
                i,
                c.text,
                c.char_start,
                c.char_end,
                c.heading_path,
                chunk_context(title, c.heading_path),
                vec,
                c.page_start,
                c.page_end,
            )
            for i, (c, vec) in enumerate(zip(chunks, vectors, strict=True))
        ]
        await conn.copy_records_to_table("chunks", records=records, columns=CHUNK_COLUMNS)

    async def find_existing(self, source_id: UUID, url: str | None, digest: str) -> Document | None:
        """The document this content would replace or duplicate: same URL, else same content hash."""
        if url:
            row = await self.db.pool.fetchrow(
                f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE source_id = $1 AND url = $2", source_id, url
            )
            if row is not None:
                return _to_document(row)
        row = await self.db.pool.fetchrow(
            f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE source_id = $1 AND content_hash = $2 LIMIT 1",
            source_id,
            digest,
        )
        return _to_document(row) if row else None

    async def ingest(
        self,
        source_id: UUID,
        title: str,
        content: str,
        document_type: str,
        url: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> IngestResult:
        """Store content as a document of the source: created, replaced (same URL, new content) or
        reported unchanged (same content already there). Every ingestion path comes through here."""
        item = NewDocument(title, content, document_type, url, metadata)
        return (await self.ingest_many(source_id, [item]))[0]

    async def ingest_many(self, source_id: UUID, items: list[NewDocument]) -> list[IngestResult]:
        """Ingest several documents with one embedding call for all their new chunks (much faster
        than one call per document); each document is still written in its own transaction."""
        for item in items:
            if not item.content.strip():
                raise InvalidArgument("The document has no text content.", "Provide non-empty content.")
        results: list[IngestResult | None] = [None] * len(items)
        to_embed: list[tuple[int, str, list[Chunk]]] = []
        batch_hashes: set[str] = set()
        repeats: list[int] = []
        for i, item in enumerate(items):
            digest = content_hash(item.content)
            existing = await self.find_existing(source_id, item.url, digest)
            if existing is not None and existing.content_hash == digest:
                results[i] = IngestResult(document=existing, status="unchanged")
            elif digest in batch_hashes:
                repeats.append(i)  # same content twice in this batch: settled once the first is stored
            else:
                batch_hashes.add(digest)
                chunker = get_chunker(self.settings, document_type=item.document_type, metadata=item.metadata)
                to_embed.append((i, digest, chunker.chunk(item.content)))
        texts = [embedding_text(items[i].title, c.heading_path, c.text) for i, _, chunks in to_embed for c in chunks]
        vectors = list(await embed_documents_async(self.embedder, texts)) if texts else []
        position = 0
        for i, digest, chunks in to_embed:
            doc_vectors = vectors[position : position + len(chunks)]
            position += len(chunks)
            results[i] = await self._store(source_id, items[i], digest, chunks, doc_vectors)
        for i in repeats:
            item = items[i]
            results[i] = await self.ingest(
                source_id, item.title, item.content, item.document_type, item.url, item.metadata
            )
        if to_embed:
            await self.db.pool.execute("UPDATE sources SET updated_at = now() WHERE id = $1", source_id)
        return [r for r in results if r is not None]

    async def _store(
        self, source_id: UUID, item: NewDocument, digest: str, chunks: list[Chunk], vectors: list[Any]
    ) -> IngestResult:
        async with self.db.pool.acquire() as conn, conn.transaction():
            duplicate = await self._locked_duplicate(conn, source_id, item.url, digest)
            if duplicate is not None:
                return IngestResult(document=duplicate, status="unchanged")
            row = await conn.fetchrow(
                "INSERT INTO documents (source_id, title, url, document_type, content, content_hash, "
                "metadata, chunk_count) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
                "ON CONFLICT (source_id, url) DO UPDATE SET title = EXCLUDED.title, "
                "document_type = EXCLUDED.document_type, content = EXCLUDED.content, "
                "content_hash = EXCLUDED.content_hash, metadata = documents.metadata || EXCLUDED.metadata, "
                "chunk_count = EXCLUDED.chunk_count, updated_at = now() "
                f"RETURNING {DOCUMENT_COLUMNS}, (xmax <> 0) AS replaced",
                source_id,
                item.title,
                item.url,
                item.document_type,
                item.content,
                digest,
                check_metadata(item.metadata),
                len(chunks),
            )
            await self._write_chunks(conn, row["id"], source_id, item.title, chunks, vectors)
        status = "updated" if row["replaced"] else "created"
        return IngestResult(document=_to_document(row), status=status, chunks_created=len(chunks))

    async def _locked_duplicate(
        self, conn: asyncpg.Connection, source_id: UUID, url: str | None, digest: str
    ) -> Document | None:
        """Inside the writing transaction: serialise writers of the same content in a source, then
        return the document already holding it when this would be a new document (no row at `url`).
        Without the lock, two pages with the same content ingested at once would both be stored."""
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", f"{source_id}:{digest}")
        row = await conn.fetchrow(
            f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE source_id = $1 AND content_hash = $2 "
            "AND NOT EXISTS (SELECT 1 FROM documents WHERE source_id = $1 AND url = $3) LIMIT 1",
            source_id,
            digest,
            url,
        )
        return _to_document(row) if row else None
