"""Documents from text, files, directories and single web pages (all through Ingestor.ingest_many)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path, PurePath
from typing import Any
from uuid import UUID

from models import FileFailure, IngestResult
from services.access.paths import caller_roots, read_allowed_file, resolve_allowed_path, resolve_caller_path, scan_files
from services.core.database import Database
from services.core.errors import InvalidArgument, ServiceError
from services.core.settings import Settings
from services.documents.freshness import FILE_MTIME, file_mtime
from services.documents.ingest import Ingestor
from services.documents.links import write_links
from services.documents.specs import SpecDocument, SpecIngestResult, SpecStore, page_spec, spec_in
from services.documents.text import (
    DIRECTORY_BATCH,
    MAX_DIRECTORY_FILES,
    NewDocument,
    ProgressFn,
    check_metadata,
    guess_text_type,
    guess_title,
    page_content,
)
from services.flags.hidden import evidence
from services.parsers import supported_extensions
from services.parsers.isolation import parse_file as parse_isolated

logger = logging.getLogger(__name__)


def relative_path(path: Path, root: Path) -> str:
    """`path` inside `root`, with forward slashes (the file's own name when it is not inside)."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name


class FileIngest:
    """Documents from text, files, directories and web pages (part of DocumentService): read and parsed
    here, stored through the Ingestor (and the SpecStore for OpenAPI specs)."""

    def __init__(self, db: Database, settings: Settings, ingestor: Ingestor, specs: SpecStore) -> None:
        self.db = db
        self.settings = settings
        self.ingestor = ingestor
        self.specs = specs

    async def create_from_text(
        self,
        source_id: UUID,
        content: str,
        title: str | None = None,
        url: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> IngestResult:
        doc_title = (title or guess_title(content)).strip()[:500]
        return await self.ingestor.ingest(source_id, doc_title, content, guess_text_type(content), url, metadata)

    async def read_file(
        self,
        path: Path,
        title: str | None = None,
        url: str | None = None,
        metadata: dict[str, Any] | None = None,
        relative: str | None = None,
    ) -> NewDocument:
        """Check (allowed roots, hidden parts, size), read (checked again on the opened file) and parse
        one file into a document to ingest; heavy formats are parsed in a limited worker process.
        The roots are the caller's (its profiles' allowed paths inside the server's, services/access/paths.py).
        `relative`: the file's path inside the folder being ingested (see `parse_file`)."""
        allowed, setting = caller_roots(self.settings.allowed_paths)
        resolved = resolve_allowed_path(str(path), allowed, setting)
        if not resolved.is_file():
            raise InvalidArgument(f"{path} is not a regular file.", "Pass a file or a directory path.")
        data = await asyncio.to_thread(read_allowed_file, resolved, allowed, self.settings.max_file_bytes, setting)
        stamped = {FILE_MTIME: file_mtime(resolved.stat().st_mtime), **(metadata or {})}  # last_modified
        return await self.parse_file(
            data, resolved, str(resolved), title, url or resolved.as_uri(), stamped, relative=relative
        )

    async def parse_file(
        self,
        data: bytes,
        name: PurePath,
        file_path: str,
        title: str | None = None,
        url: str | None = None,
        metadata: dict[str, Any] | None = None,
        relative: str | None = None,
    ) -> NewDocument:
        """Parse a file's bytes (the parser chosen by `name`'s extension) into a document to ingest; for
        files that are not on disk too (git blobs). `file_path` names the file for the code chunker.
        Heavy formats are parsed in a limited worker process (services/parsers/isolation.py).

        `relative` is the file's path inside the folder or repository being ingested: stored as metadata
        `path`, and a code file without a given title is titled by it (`starlette/middleware/gzip.py`,
        not one `gzip.py` among many: search results of code name the file, issue 29, point 3)."""
        if len(data) > self.settings.max_file_bytes:
            raise InvalidArgument(
                f"{name.name} is {len(data) / 1048576:.1f} MB, over the "
                f"{self.settings.max_file_bytes / 1048576:.1f} MB limit.",
                "Split the file, or raise ARCHIVIST_MAX_FILE_MB on the server.",
            )
        parsed = await parse_isolated(data, Path(name), self.settings)
        if not parsed.content.strip():
            raise InvalidArgument(f"{name.name} has no text content.", "Skip empty files.")
        meta = {"file_path": file_path, "file_size": len(data), **parsed.metadata, **check_metadata(metadata)}
        if relative:
            meta["path"] = relative
        fallback = relative if relative and parsed.document_type == "code" else name.name
        doc_title = (title or parsed.title or fallback).strip()[:500]
        return NewDocument(doc_title, parsed.content, parsed.document_type, url, meta, parsed.links)

    async def create_from_file(
        self,
        source_id: UUID,
        path: Path,
        title: str | None = None,
        url: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> IngestResult | SpecIngestResult:
        """One file as a document; an OpenAPI/Swagger spec as one document per operation."""
        item = await self.read_file(path, title, url, metadata)
        spec = await spec_in(item, self.settings)
        if spec is not None:
            return await self.specs.ingest_spec(source_id, spec, item.url or path.as_uri(), metadata)
        return (await self.ingestor.ingest_many(source_id, [item]))[0]

    async def create_from_directory(
        self,
        source_id: UUID,
        directory: Path,
        extensions: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        progress: ProgressFn | None = None,
        recursive: bool = True,
        passed_over: list[tuple[Path, str]] | None = None,
    ) -> tuple[list[tuple[Path, IngestResult]], list[FileFailure], int]:
        """Ingest every matching file under a directory, in batches; one file's failure never stops
        the rest. Every file is stored (keyword-searchable) before any is embedded. Returns (results,
        failures, files_skipped_over_limit); `passed_over`, when given, receives each file not ingested
        on purpose with its reason (scan_files' reasons, or the limit)."""
        wanted = self._extension_filter(extensions)
        directory = resolve_caller_path(str(directory), self.settings.allowed_paths)  # nothing walked outside
        results: list[tuple[Path, IngestResult]] = []
        failures: list[FileFailure] = []
        batch: list[tuple[Path, NewDocument]] = []
        skipped = 0
        expanded = 0  # results beyond one per file: a spec's operations

        def fail(path: Path, message: str) -> None:
            failures.append(FileFailure(path=str(path), error=message))
            if progress:
                progress(path, None, message)

        for path, reason in scan_files(directory, wanted, recursive, set(supported_extensions())):
            if reason is None and len(results) - expanded + len(failures) + len(batch) >= MAX_DIRECTORY_FILES:
                skipped += 1
                reason = f"over the {MAX_DIRECTORY_FILES}-file limit"
            if reason is not None:
                if passed_over is not None:
                    passed_over.append((path, reason))
                continue
            try:
                item = await self.read_file(path, metadata=metadata, relative=relative_path(path, directory))
                spec = await spec_in(item, self.settings)
                if spec is not None:  # an OpenAPI spec: its operations, at once
                    documents = await self._ingest_spec_file(source_id, path, spec, item.url, metadata, progress)
                    results += documents
                    expanded += len(documents) - 1
                else:
                    batch.append((path, item))
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
        await self.ingestor.settle_embeddings([r.document.id for _, r in results if r.chunks_created], embed=True)
        return results, failures, skipped

    async def _ingest_spec_file(
        self,
        source_id: UUID,
        path: Path,
        spec: list[SpecDocument],
        url: str | None,
        metadata: dict[str, Any] | None,
        progress: ProgressFn | None,
    ) -> list[tuple[Path, IngestResult]]:
        outcome = await self.specs.ingest_spec(source_id, spec, url or path.as_uri(), metadata)
        if progress and outcome.results:
            progress(path, outcome.results[0], None)
        return [(path, result) for result in outcome.results]

    async def _ingest_batch(
        self, source_id: UUID, batch: list[tuple[Path, NewDocument]], progress: ProgressFn | None
    ) -> list[tuple[Path, IngestResult]]:
        stored = await self.ingestor.ingest_many(source_id, [item for _, item in batch], embed=False)
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

    async def create_from_url(
        self,
        source_id: UUID,
        url: str,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> IngestResult | SpecIngestResult:
        """Fetch one web page (same fetcher and safety checks as the crawler) and ingest it."""
        from services.fetchers import create_fetcher
        from services.net.safety import check_url_allowed
        from services.net.urls import normalize_url

        normalized = normalize_url(url)
        if normalized is None:
            raise InvalidArgument(f"Invalid URL: {url[:200]}", "Use a full http:// or https:// URL.")
        await check_url_allowed(normalized, self.settings.crawl_allow_private)
        fetcher = create_fetcher(self.settings)
        try:
            page = await fetcher.fetch(normalized)
        finally:
            await fetcher.close()
        spec = await page_spec(page, self.settings)
        if spec is not None:  # an OpenAPI spec: one document per operation
            return await self.specs.ingest_spec(source_id, spec, page.final_url or normalized, metadata)
        parsed_title, content, doc_type = await page_content(page, self.settings)
        meta = {"http_status": page.status, "content_type": page.content_type, **evidence(page.metadata)}
        meta.update(check_metadata(metadata))
        doc_title = (title or parsed_title or normalized).strip()[:500]
        result = await self.ingestor.ingest(source_id, doc_title, content, doc_type, page.final_url or normalized, meta)
        async with self.db.pool.acquire() as conn:
            await write_links(conn, result.document.id, source_id, page.links)
        return result
