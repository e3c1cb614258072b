"""Documents: ingestion (chunk + embed + store), reading, listing, updating and deleting."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import asyncpg

from models import ChunkView, ContentWindow, Document, FileFailure, IngestResult, Page
from services.chunking import get_chunker
from services.chunking.base import Chunk
from services.database import Database
from services.embeddings import embed_documents_async
from services.embeddings.base import Embedder
from services.errors import Conflict, InvalidArgument, NotFound, ServiceError
from services.fetchers.base import FetchResult
from services.parsers import parse_bytes, supported_extensions
from services.paths import check_file_size, resolve_allowed_path, walk_files
from services.scope import current_scope
from services.settings import Settings
from services.sources import LIST_HINT as SOURCE_LIST_HINT
from services.sources import SourceService
from services.validation import check_page, parse_uuid

logger = logging.getLogger(__name__)

DOC_HINT = "Use manage_document(action='list', source_id=...) to find document ids."
DOCUMENT_COLUMNS = (
    "id, source_id, title, url, document_type, content_hash, length(content) AS content_length, "
    "metadata, chunk_count, created_at, updated_at"
)
# Column order of the records written to `chunks` with COPY.
CHUNK_COLUMNS = [
    "document_id",
    "source_id",
    "chunk_index",
    "text",
    "char_start",
    "char_end",
    "heading_path",
    "context",
    "embedding",
    "page_start",
    "page_end",
]
WINDOW_SIZE = 1000
MAX_METADATA_BYTES = 16_384
MAX_DIRECTORY_FILES = 1000
DIRECTORY_BATCH = 32

ProgressFn = Callable[[Path, IngestResult | None, str | None], None]


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def embedding_text(title: str, heading_path: list[str], text: str) -> str:
    """What is embedded for a chunk: the document title and heading path give it context."""
    header = " > ".join([title, *heading_path]) if heading_path else title
    return f"{header}\n\n{text}"


def chunk_context(title: str, heading_path: list[str]) -> str:
    return " ".join([title, *heading_path])


def guess_title(content: str, fallback: str = "Untitled") -> str:
    """First markdown heading, else the first non-empty line, cut to 200 characters."""
    match = re.search(r"^#{1,6}\s+(.+?)\s*#*\s*$", content, flags=re.MULTILINE)
    if match:
        return match.group(1)[:200]
    for line in content.splitlines():
        if line.strip():
            return line.strip()[:200]
    return fallback


def guess_text_type(content: str) -> str:
    return "markdown" if re.search(r"^#{1,6}\s|^```|^\s*[-*]\s|\[[^\]]+\]\([^)]+\)", content, re.M) else "text"


def check_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise InvalidArgument("metadata must be a JSON object.", 'Pass metadata like {"author": "..."}.')
    size = len(json.dumps(metadata, default=str))
    if size > MAX_METADATA_BYTES:
        raise InvalidArgument(
            f"metadata is {size} bytes, over the {MAX_METADATA_BYTES}-byte limit.", "Store less metadata."
        )
    return metadata


def page_content(page: FetchResult) -> tuple[str | None, str, str]:
    """(title, text, document_type) of a fetched page; errors name the HTTP outcome."""
    if not page.ok:
        detail = page.error or f"HTTP {page.status}"
        raise InvalidArgument(
            f"Could not fetch {page.url}: {detail}",
            "Check the URL in a browser; only text pages and PDFs are ingested.",
        )
    if page.raw is not None:  # the fetcher hands over raw bytes only for PDFs
        parsed = parse_bytes(page.raw, Path("page.pdf"))
        return parsed.title, parsed.content, parsed.document_type
    if not page.markdown.strip():
        raise InvalidArgument(f"{page.url} has no text content.", "Pages rendered by JavaScript need browser mode.")
    return page.title, page.markdown, PAGE_TYPES.get(page.content_type.split(";")[0].strip().lower(), "html")


PAGE_TYPES = {"text/markdown": "markdown", "text/x-markdown": "markdown", "text/plain": "text"}


@dataclass
class NewDocument:
    """One document to ingest."""

    title: str
    content: str
    document_type: str
    url: str | None = None
    metadata: dict[str, Any] | None = None


def _to_document(row: asyncpg.Record) -> Document:
    return Document(**dict(row))


class DocumentService:
    def __init__(self, db: Database, sources: SourceService, embedder: Embedder, settings: Settings) -> None:
        self.db = db
        self.sources = sources
        self.embedder = embedder
        self.settings = settings

    # ---------- ingestion ----------

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

    async def resolve_source(self, source_id: str | UUID | None, title: str | None) -> tuple[UUID, bool]:
        """The target source: the given id (must exist), else one found or created by title."""
        if source_id:
            return (await self.sources.get(source_id)).id, False
        if not title:
            raise InvalidArgument(
                "source_id is required (or a title, to create a source named after it).",
                SOURCE_LIST_HINT + " Or pass title='My notes' to create one.",
            )
        source, created = await self.sources.get_or_create(title)
        return source.id, created

    async def create_from_text(
        self,
        source_id: UUID,
        content: str,
        title: str | None = None,
        url: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> IngestResult:
        doc_title = (title or guess_title(content)).strip()[:500]
        return await self.ingest(source_id, doc_title, content, guess_text_type(content), url, metadata)

    def read_file(
        self, path: Path, title: str | None = None, url: str | None = None, metadata: dict[str, Any] | None = None
    ) -> NewDocument:
        """Check (allowed roots, size) and parse one file into a document to ingest."""
        resolved = resolve_allowed_path(str(path), self.settings.allowed_paths)
        if not resolved.is_file():
            raise InvalidArgument(f"{path} is not a regular file.", "Pass a file or a directory path.")
        size = check_file_size(resolved, self.settings.max_file_bytes)
        parsed = parse_bytes(resolved.read_bytes(), resolved)
        if not parsed.content.strip():
            raise InvalidArgument(f"{resolved.name} has no text content.", "Skip empty files.")
        meta = {"file_path": str(resolved), "file_size": size, **parsed.metadata, **check_metadata(metadata)}
        doc_title = (title or parsed.title or resolved.name).strip()[:500]
        return NewDocument(doc_title, parsed.content, parsed.document_type, url or resolved.as_uri(), meta)

    async def create_from_file(
        self,
        source_id: UUID,
        path: Path,
        title: str | None = None,
        url: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> IngestResult:
        return (await self.ingest_many(source_id, [self.read_file(path, title, url, metadata)]))[0]

    async def create_from_directory(
        self,
        source_id: UUID,
        directory: Path,
        extensions: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        progress: ProgressFn | None = None,
        recursive: bool = True,
    ) -> tuple[list[tuple[Path, IngestResult]], list[FileFailure], int]:
        """Ingest every matching file under a directory, in batches; one file's failure never stops
        the rest. Returns (results, failures, files_skipped_over_limit)."""
        wanted = self._extension_filter(extensions)
        results: list[tuple[Path, IngestResult]] = []
        failures: list[FileFailure] = []
        batch: list[tuple[Path, NewDocument]] = []
        skipped = 0

        def fail(path: Path, message: str) -> None:
            failures.append(FileFailure(path=str(path), error=message))
            if progress:
                progress(path, None, message)

        for path in walk_files(directory, wanted, recursive):
            if len(results) + len(failures) + len(batch) >= MAX_DIRECTORY_FILES:
                skipped += 1
                continue
            try:
                batch.append((path, self.read_file(path, metadata=metadata)))
            except ServiceError as exc:
                fail(path, exc.message)
            except Exception as exc:  # a parser bug must not stop the directory
                logger.exception("failed to read %s", path)
                fail(path, f"unexpected error: {type(exc).__name__}")
            if len(batch) >= DIRECTORY_BATCH:
                results += await self._ingest_batch(source_id, batch, progress)
                batch = []
        if batch:
            results += await self._ingest_batch(source_id, batch, progress)
        return results, failures, skipped

    async def _ingest_batch(
        self, source_id: UUID, batch: list[tuple[Path, NewDocument]], progress: ProgressFn | None
    ) -> list[tuple[Path, IngestResult]]:
        stored = await self.ingest_many(source_id, [item for _, item in batch])
        done = [(path, result) for (path, _), result in zip(batch, stored, strict=True)]
        for path, result in done:
            if progress:
                progress(path, result, None)
        return done

    @staticmethod
    def _extension_filter(extensions: list[str] | None) -> set[str]:
        supported = set(supported_extensions())
        if not extensions:
            return supported
        wanted = {e.lower() if e.startswith(".") else f".{e.lower()}" for e in extensions}
        unknown = wanted - supported
        if unknown:
            raise InvalidArgument(
                f"Unsupported extensions: {', '.join(sorted(unknown))}.",
                f"Supported: {', '.join(sorted(supported))}.",
            )
        return wanted

    # ---------- reading ----------

    async def get(self, document_id: str | UUID | None) -> Document:
        did = parse_uuid(document_id, "document_id", DOC_HINT)
        row = await self.db.pool.fetchrow(f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE id = $1", did)
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
            "SELECT id, document_id, chunk_index, text, char_start, char_end, heading_path, page_start, page_end "
            "FROM chunks "
            "WHERE document_id = $1 AND chunk_index = $2",
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

    async def list(self, source_id: str | UUID | None, page: int = 1, per_page: int = 10) -> Page[Document]:
        page, per_page = check_page(page, per_page)
        sid = None
        if source_id:
            sid = (await self.sources.get(source_id)).id
        elif current_scope().source_ids is not None:
            raise InvalidArgument("source_id is required under a profile scope.", "Pass one of your sources' ids.")
        rows, total = await self.db.fetch_page(
            DOCUMENT_COLUMNS,
            "documents WHERE $1::uuid IS NULL OR source_id = $1",
            "created_at, id",
            [sid],
            page,
            per_page,
        )
        return Page[Document](items=[_to_document(r) for r in rows], total_count=total, page=page, per_page=per_page)

    # ---------- changing ----------

    async def update(
        self,
        document_id: str | UUID | None,
        title: str | None = None,
        url: str | None = None,
        metadata: dict[str, Any] | None = None,
        content: str | None = None,
    ) -> IngestResult:
        """Merge title/url/metadata; new content (or a new title, which is embedded with every chunk)
        re-chunks and re-embeds, swapped in one transaction so readers never see a half-updated document."""
        current = await self.get(document_id)
        if all(v is None for v in (title, url, metadata, content)):
            raise InvalidArgument("Nothing to update.", "Provide title, url, metadata or content.")
        if content is not None and not content.strip():
            raise InvalidArgument("content must not be empty.", "Delete the document instead of emptying it.")
        new_title = title.strip()[:500] if title and title.strip() else current.title
        reindex = (content is not None and content_hash(content) != current.content_hash) or (
            new_title != current.title
        )
        chunks: list[Chunk] = []
        vectors: list[Any] = []
        if reindex:
            text = content if content is not None else await self._content(current.id)
            doc_type = self._updated_type(current.document_type, content)
            chunks, vectors = await self.prepare_chunks(new_title, text, doc_type, current.metadata)
        async with self.db.pool.acquire() as conn, conn.transaction():
            locked = await conn.fetchval("SELECT id FROM documents WHERE id = $1 FOR UPDATE", current.id)
            if locked is None:
                raise NotFound(f"Document not found: {current.id}", DOC_HINT)
            try:
                await conn.execute(
                    "UPDATE documents SET title = $2, url = coalesce($3, url), "
                    "metadata = metadata || $4, updated_at = now() WHERE id = $1",
                    current.id,
                    new_title,
                    url,
                    check_metadata(metadata),
                )
            except asyncpg.UniqueViolationError:
                raise Conflict(
                    f"Another document in this source already has url {url}.",
                    "Use a different url, or update that document instead.",
                ) from None
            if reindex:
                if content is not None:
                    await conn.execute(
                        "UPDATE documents SET content = $2, content_hash = $3, document_type = $4 WHERE id = $1",
                        current.id,
                        content,
                        content_hash(content),
                        doc_type,
                    )
                await conn.execute("UPDATE documents SET chunk_count = $2 WHERE id = $1", current.id, len(chunks))
                await self._write_chunks(conn, current.id, current.source_id, new_title, chunks, vectors)
        return IngestResult(
            document=await self.get(current.id),
            status="updated",
            chunks_created=len(chunks) if reindex else 0,
        )

    async def set_links(self, conn: asyncpg.Connection, document_id: UUID, source_id: UUID, urls: list[str]) -> None:
        """Replace a document's outlinks (absolute, normalised URLs)."""
        await conn.execute("DELETE FROM document_links WHERE from_document_id = $1", document_id)
        await conn.executemany(
            "INSERT INTO document_links (from_document_id, source_id, to_url) VALUES ($1, $2, $3) "
            "ON CONFLICT DO NOTHING",
            [(document_id, source_id, u) for u in dict.fromkeys(urls)],
        )

    async def links(self, document_id: UUID, limit: int = 20) -> dict[str, Any] | None:
        """Outlinks and backlinks inside the knowledge base (None when the document has neither)."""
        async with self.db.pool.acquire() as conn:
            doc = await conn.fetchrow("SELECT source_id, url FROM documents WHERE id = $1", document_id)
            out_total = await conn.fetchval(
                "SELECT count(*) FROM document_links WHERE from_document_id = $1", document_id
            )
            back_total = 0
            if doc["url"]:
                back_total = await conn.fetchval(
                    "SELECT count(*) FROM document_links WHERE source_id = $1 AND to_url = $2",
                    doc["source_id"],
                    doc["url"],
                )
            if not out_total and not back_total:
                return None
            outlinks = await conn.fetch(
                "SELECT l.to_url AS url, d.id AS document_id, d.title FROM document_links l "
                "LEFT JOIN documents d ON d.source_id = l.source_id AND d.url = l.to_url "
                "WHERE l.from_document_id = $1 ORDER BY (d.id IS NULL), l.to_url LIMIT $2",
                document_id,
                limit,
            )
            backlinks = await conn.fetch(
                "SELECT d.url, d.id AS document_id, d.title FROM document_links l "
                "JOIN documents d ON d.id = l.from_document_id "
                "WHERE l.source_id = $1 AND l.to_url = $2 ORDER BY d.url LIMIT $3",
                doc["source_id"],
                doc["url"],
                limit,
            )
        return {
            "outlinks": [dict(r) for r in outlinks],
            "outlinks_total": out_total,
            "backlinks": [dict(r) for r in backlinks],
            "backlinks_total": back_total,
        }

    async def create_from_url(
        self,
        source_id: UUID,
        url: str,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> IngestResult:
        """Fetch one web page (same fetcher and safety checks as the crawler) and ingest it."""
        from services.crawl.safety import check_url_allowed
        from services.crawl.urls import normalize_url
        from services.fetchers import create_fetcher

        normalized = normalize_url(url)
        if normalized is None:
            raise InvalidArgument(f"Invalid URL: {url[:200]}", "Use a full http:// or https:// URL.")
        await check_url_allowed(normalized, self.settings.crawl_allow_private)
        fetcher = create_fetcher(self.settings)
        try:
            page = await fetcher.fetch(normalized)
        finally:
            await fetcher.close()
        parsed_title, content, doc_type = page_content(page)
        meta = {"http_status": page.status, "content_type": page.content_type, **check_metadata(metadata)}
        doc_title = (title or parsed_title or normalized).strip()[:500]
        result = await self.ingest(source_id, doc_title, content, doc_type, page.final_url or normalized, meta)
        async with self.db.pool.acquire() as conn:
            await self.set_links(conn, result.document.id, source_id, page.links)
        return result

    @staticmethod
    def _updated_type(current_type: str, content: str | None) -> str:
        if content is not None and current_type in ("text", "markdown"):
            return guess_text_type(content)
        return current_type

    async def _content(self, document_id: UUID) -> str:
        return await self.db.pool.fetchval("SELECT content FROM documents WHERE id = $1", document_id)

    async def delete(self, document_id: str | UUID | None) -> dict[str, Any]:
        did = parse_uuid(document_id, "document_id", DOC_HINT)
        async with self.db.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "DELETE FROM documents WHERE id = $1 RETURNING title, source_id, chunk_count", did
            )
            if row is None:
                raise NotFound(f"Document not found: {did}", DOC_HINT)
            await conn.execute("UPDATE sources SET updated_at = now() WHERE id = $1", row["source_id"])
        return {
            "document_id": str(did),
            "title": row["title"],
            "source_id": str(row["source_id"]),
            "chunks_deleted": row["chunk_count"],
        }
