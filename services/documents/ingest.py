"""Ingestion in two phases: chunk outside transactions and store each document atomically (chunks by
COPY, without vectors: keyword-searchable at once), then embed from the backlog (services/documents/
backlog.py): here, before returning, or (`embed=False`: crawls, syncs, directories) by the backlog runner."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID

import asyncpg

from models import Document, IngestResult
from services.chunking import get_chunker
from services.chunking.base import Chunk
from services.code.lines import write_lines
from services.code.symbol_store import write_symbols
from services.core.database import Database
from services.core.errors import InvalidArgument
from services.core.settings import Settings
from services.documents.backlog import EmbeddingBacklog
from services.documents.links import content_links, write_links
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
from services.flags import chunk_flags

STORE_LANES = 2  # documents one ingest_many call stores at once when it leaves embedding to the backlog


class Ingestor:
    """Chunk, embed and store documents: the part of DocumentService every other write goes through."""

    def __init__(self, db: Database, embedder: Embedder, settings: Settings, backlog: EmbeddingBacklog) -> None:
        self.db = db
        self.embedder = embedder
        self.settings = settings
        self.backlog = backlog  # phase two: the vectors

    def chunk(self, content: str, document_type: str, metadata: dict[str, Any] | None = None) -> list[Chunk]:
        """The document's chunks (by its kind), computed outside any transaction."""
        return get_chunker(self.settings, document_type=document_type, metadata=metadata).chunk(content)

    async def embed_chunks(self, groups: list[tuple[str, list[Chunk]]]) -> list[list[Any]]:
        """Vectors for each (title, chunks) group, in one embedding call, before any transaction: a
        document created or updated by one call is stored with its vectors (one write, nothing pending)."""
        texts = [embedding_text(title, c.heading_path, c.text) for title, chunks in groups for c in chunks]
        flat = list(await embed_documents_async(self.embedder, texts)) if texts else []
        out, k = [], 0
        for _, chunks in groups:
            out.append(flat[k : k + len(chunks)])
            k += len(chunks)
        return out

    async def settle_embeddings(self, document_ids: list[UUID], embed: bool) -> None:
        """Phase two: embed these documents' pending chunks now, or leave them to the backlog runner."""
        if embed:
            await self.backlog.drain(document_ids)
        elif document_ids:
            self.backlog.wakeup.set()

    async def write_chunks(
        self,
        conn: asyncpg.Connection,
        document_id: UUID,
        source_id: UUID,
        title: str,
        chunks: list[Chunk],
        vectors: list[Any] | None = None,
        metadata: dict[str, Any] | None = None,
        fresh: bool = False,
    ) -> None:
        """Replace the document's chunks (in the caller's transaction), with their vectors when given,
        else pending (the backlog embeds them), and their injection flags (services/flags: the text
        rules, and `metadata`'s hidden-text evidence from the page pipeline). `fresh`: the document row
        was inserted by this transaction, so it has no rows to delete."""
        flags = chunk_flags(title, chunks, metadata)  # ~50 us a chunk
        if not fresh:
            await conn.execute("DELETE FROM chunks WHERE document_id = $1", document_id)
        now = datetime.now(UTC)
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
                vectors[i] if vectors else None,  # None: pending
                c.page_start,
                c.page_end,
                now if vectors else None,
                flags[i],
            )
            for i, c in enumerate(chunks)
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
        embed: bool = True,
    ) -> IngestResult:
        """Store content as a document of the source: created, replaced (same URL, new content) or
        reported unchanged (same content already there). Every ingestion path comes through here."""
        item = NewDocument(title, content, document_type, url, metadata)
        return (await self.ingest_many(source_id, [item], embed=embed))[0]

    async def ingest_many(self, source_id: UUID, items: list[NewDocument], embed: bool = True) -> list[IngestResult]:
        """Store several documents, each in its own transaction (keyword-searchable once committed), then
        embed their new chunks together (`embed`) or leave them to the backlog runner."""
        for item in items:
            if not item.content.strip():
                raise InvalidArgument("The document has no text content.", "Provide non-empty content.")
        results: list[IngestResult | None] = [None] * len(items)
        to_store: list[tuple[int, str]] = []
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
                to_store.append((i, digest))
        if embed:
            await self._store_with_vectors(source_id, items, to_store, results)
        else:
            await self._store_in_lanes(source_id, items, to_store, results)
        for i in repeats:
            item = items[i]
            results[i] = await self.ingest(
                source_id, item.title, item.content, item.document_type, item.url, item.metadata, embed=False
            )
        if to_store:
            await self.db.pool.execute("UPDATE sources SET updated_at = now() WHERE id = $1", source_id)
        written = [r.document.id for r in results if r is not None and r.chunks_created]
        await self.settle_embeddings(written, embed)
        return [r for r in results if r is not None]

    async def _store_with_vectors(
        self, source_id: UUID, items: list[NewDocument], to_store: list[tuple[int, str]], results: list[Any]
    ) -> None:
        """Chunk every document, embed all their chunks in one call, then store each with its vectors."""
        chunked = [(i, d, self.chunk(items[i].content, items[i].document_type, items[i].metadata)) for i, d in to_store]
        vectors = list(await self.embed_chunks([(items[i].title, chunks) for i, _, chunks in chunked]))
        for (i, digest, chunks), chunk_vectors in zip(chunked, vectors, strict=True):
            results[i] = await self._store(source_id, items[i], digest, chunks, chunk_vectors)

    async def _store_in_lanes(
        self, source_id: UUID, items: list[NewDocument], to_store: list[tuple[int, str]], results: list[Any]
    ) -> None:
        """Chunk and store without vectors, STORE_LANES documents at a time: while one document's
        statements run in PostgreSQL, the next is chunked and its symbols read here (one at a time,
        the two took turns: a stdlib sync spent 105 s of CPU here and 205 s in PostgreSQL). Documents
        sharing a URL are stored in order, one lane."""
        pending = iter(to_store)

        async def lane() -> None:
            for i, digest in pending:  # shared: each lane takes the next document
                item = items[i]
                chunks = self.chunk(item.content, item.document_type, item.metadata)
                results[i] = await self._store(source_id, item, digest, chunks)

        urls = [items[i].url for i, _ in to_store if items[i].url]
        lanes = STORE_LANES if len(set(urls)) == len(urls) else 1
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(lanes, len(to_store))):
                    group.create_task(lane())
        except BaseExceptionGroup as failed:  # callers map plain errors (a database fault: UNAVAILABLE)
            raise failed.exceptions[0] from None

    async def _store(
        self, source_id: UUID, item: NewDocument, digest: str, chunks: list[Chunk], vectors: list[Any] | None = None
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
            fresh = not row["replaced"]  # a new row: nothing of it to delete (five round trips fewer)
            await self.write_chunks(conn, row["id"], source_id, item.title, chunks, vectors, item.metadata, fresh)
            await write_lines(conn, row["id"], source_id, item.content, item.metadata, fresh)  # grep (services/code)
            await write_symbols(conn, row["id"], source_id, item.content, item.metadata, fresh)  # services/code
            links = item.links if item.links is not None else content_links(item.content, item.document_type, item.url)
            if links is not None:  # the page graph of ingested text and files (crawls write theirs too)
                await write_links(conn, row["id"], source_id, links)
        status: Literal["updated", "created"] = "updated" if row["replaced"] else "created"
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
