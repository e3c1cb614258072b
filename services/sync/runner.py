"""Runs one sync job: scan the folder, ingest new and changed files, remove deleted ones.

Seeding (once per job) compares a scan (size + mtime, nothing read) with `folder_files`, the
manifest of the last sync: files whose size and mtime are unchanged are recorded `done/unchanged`
at once; the others become pending frontier rows (depth 0), and manifest paths no longer on disk
become pending rows of origin 'missing' (depth 1, so they are settled after every file). Pending
files are then read in batches: same content hash as before -> unchanged; the content of a missing
file -> a rename (the document moves, nothing is re-embedded); else ingested (created / updated).
Missing paths left over are deleted with their documents. A worker that dies leaves rows in
`fetching`; whoever resumes the job puts them back to `pending` and goes on. Files are stored without
vectors (keyword-searchable at once) and embedded by the backlog runners; the job embeds what is left
of its own before it completes.
"""

from __future__ import annotations

import asyncio
import logging
from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from uuid import UUID

import asyncpg

from models.jobs import ended_status
from services.access.paths import resolve_allowed_path
from services.core.errors import NotFound, ServiceError
from services.core.settings import Settings
from services.documents import DocumentService, NewDocument, content_hash
from services.jobs.frontier import Frontier, RowResult
from services.jobs.queue import JobQueue
from services.jobs.run import WATCH_SECONDS, Claim, JobFailed, JobRun, short_error, wait_any
from services.sync.scan import FolderConfig, scan

logger = logging.getLogger(__name__)

BATCH = 32


class SyncFailed(JobFailed):
    """A sync that cannot run (its folder is gone or no longer allowed, its repository cannot be fetched)."""


@dataclass(frozen=True)
class SyncTools:
    """What a sync uses besides its queue: settings, the database pool (frontier, manifest), documents."""

    settings: Settings
    pool: asyncpg.Pool
    documents: DocumentService


class Folders(Protocol):
    """Where a folder sync finds its binding (services.sync.SyncService)."""

    async def folder(self, source_id: UUID | None) -> FolderConfig: ...


class SourceSync(JobRun):
    """A sync of one source, folder or git: one at a time per source (an advisory lock), then the
    kind's `_sync`; it completes by recording the sync on the source (`_mark_synced`)."""

    def __init__(self, claim: Claim, queue: JobQueue, tools: SyncTools) -> None:
        super().__init__(claim, queue, tools.settings.job_heartbeat_seconds)
        self.settings = tools.settings
        self.pool = tools.pool
        self.documents = tools.documents
        self.frontier = Frontier(tools.pool, claim.job.id, on_done=tools.documents.touch_fetched)

    async def work(self) -> None:
        async with self.pool.acquire() as lock_conn:
            if await self._lock(lock_conn):
                try:
                    with self.documents.backlog.storing():  # files first: the background embedder waits
                        await self._sync()
                finally:
                    await lock_conn.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", self._key)

    @property
    def _key(self) -> str:
        return f"sync:{self.job.source_id}"

    async def _lock(self, conn: asyncpg.Connection) -> bool:
        """One sync per source at a time: wait for another one to end (False if interrupted meanwhile)."""
        while not self.interrupt.is_set():
            if await conn.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", self._key):
                return True
            await wait_any((self.interrupt,), WATCH_SECONDS)
        return False

    @abstractmethod
    async def _sync(self) -> None:
        """The sync itself, holding the source's lock."""

    @abstractmethod
    async def _mark_synced(self) -> None:
        """Record on the source that a sync completed."""

    async def complete(self) -> None:
        await self._mark_synced()
        failed = await self.frontier.count("state = 'failed'")
        if failed:
            self.warnings.append(f"{failed} files could not be read; see recent_errors.")
        await self.queue.finish(self.job.id, self.worker_id, ended_status(failed), None, self.warnings)
        logger.info("sync %s completed", self.job.id)


class SyncRunner(SourceSync):
    """Runs one claimed sync of a folder source."""

    def __init__(self, claim: Claim, queue: JobQueue, tools: SyncTools, folders: Folders) -> None:
        super().__init__(claim, queue, tools)
        self.folders = folders
        self.manifest: dict[str, asyncpg.Record] = {}
        self.config: FolderConfig | None = None

    async def _sync(self) -> None:
        config = self.config = await self.folders.folder(self.job.source_id)
        try:
            root = resolve_allowed_path(config.path, self.settings.allowed_paths)
        except ServiceError as exc:  # unmounted / moved / no longer allowed: fail, delete nothing
            raise SyncFailed(f"The folder cannot be read: {exc.message}") from None
        if not root.is_dir():
            raise SyncFailed(f"{config.path} is not a directory.")
        await self.frontier.recover()
        await self._load_manifest()
        await self._seed_once(root, config)
        while not self.interrupt.is_set():
            rows = await self.frontier.claim(BATCH)
            if not rows:
                break
            files = [r.url for r in rows if r.origin != "missing"]
            missing = [r.url for r in rows if r.origin == "missing"]
            if files:
                await self._sync_files(root, files)
            for relative in missing:
                if relative in self.manifest:  # else settled already (renamed)
                    await self._remove(root, relative)
        if not self.interrupt.is_set():  # every file is keyword-searchable: embed the rest, then complete
            await self.documents.backlog.drain(await self.frontier.written_documents(), self.interrupt)

    # ---------- seeding ----------

    async def _load_manifest(self) -> None:
        rows = await self.pool.fetch(
            "SELECT path, size, mtime_ns, content_hash, document_id FROM folder_files WHERE source_id = $1",
            self.job.source_id,
        )
        self.manifest = {r["path"]: r for r in rows}

    async def _seed_once(self, root: Path, config: FolderConfig) -> None:
        if await self.queue.seeded(self.job.id):
            return
        found = await asyncio.to_thread(scan, root, config)
        limit = self.settings.sync_max_files
        if len(found) > limit:
            self.warnings.append(f"The folder has {len(found)} matching files; only {limit} are synced.")
        rows: list[tuple[str, int, str, str, str | None, str | None, Any, str | None]] = []
        for i, stat in enumerate(found):
            known = self.manifest.get(stat.relative)
            if i >= limit:
                if known is None:
                    rows.append((stat.relative, 0, "file", "skipped", None, None, None, "max-files"))
                    continue
            if known is not None and known["size"] == stat.size and known["mtime_ns"] == stat.mtime_ns:
                rows.append(
                    (stat.relative, 0, "file", "done", "unchanged", known["content_hash"], known["document_id"], None)
                )
            elif i < limit:
                rows.append((stat.relative, 0, "file", "pending", None, None, None, None))
        present = {stat.relative for stat in found}
        for path, known in self.manifest.items():
            if path not in present:
                rows.append((path, 1, "missing", "pending", None, known["content_hash"], known["document_id"], None))
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO crawl_frontier (job_id, url, depth, origin, state, outcome, content_hash, document_id, "
                "skip_reason, fetched_at) SELECT $1, t.url, t.depth, t.origin, t.state, t.outcome, t.hash, t.doc, "
                "t.reason, CASE WHEN t.state = 'pending' THEN NULL ELSE now() END FROM unnest($2::text[], "
                "$3::int[], $4::text[], $5::text[], $6::text[], $7::text[], $8::uuid[], $9::text[]) "
                "AS t(url, depth, origin, state, outcome, hash, doc, reason) ON CONFLICT DO NOTHING",
                self.job.id,
                *[list(column) for column in zip(*rows, strict=True)] if rows else [[]] * 8,
            )
            await self.queue.mark_seeded(self.job.id, conn)

    # ---------- files ----------

    async def _sync_files(self, root: Path, files: list[str]) -> None:
        to_ingest: list[tuple[str, int, int, str, NewDocument]] = []
        for relative in files:
            try:
                outcome = await self._check_file(root, relative)
            except ServiceError as exc:
                await self.frontier.finish_row(relative, RowResult("failed", error=short_error(exc.message)))
                continue
            except Exception as exc:  # a parser bug must not stop the sync
                logger.exception("sync %s: failed to read %s", self.job.id, relative)
                await self.frontier.finish_row(
                    relative, RowResult("failed", error=f"unexpected error: {type(exc).__name__}")
                )
                continue
            if outcome is not None:
                to_ingest.append(outcome)
        if not to_ingest:
            return
        items = [item for *_, item in to_ingest]
        results = await self.documents.ingest_many(self.source_id, items, embed=False)  # the backlog embeds
        for (relative, size, mtime_ns, digest, _), result in zip(to_ingest, results, strict=True):
            await self._remember(relative, size, mtime_ns, digest, result.document.id)
            await self.frontier.finish_row(
                relative,
                RowResult(
                    "done",
                    outcome=result.status,
                    document_id=result.document.id,
                    content_hash=digest,
                    chunks=result.document.chunk_count,
                    chunks_embedded=result.chunks_created,
                ),
            )

    async def _check_file(self, root: Path, relative: str) -> tuple[str, int, int, str, NewDocument] | None:
        """Settle a file that needs no embedding (unchanged, renamed, vanished); else what to ingest."""
        path = root / relative
        try:
            st = path.stat()
        except FileNotFoundError:
            await self.frontier.finish_row(relative, RowResult("skipped", skip_reason="vanished"))
            return None
        known = self.manifest.get(relative)
        if known is not None and known["size"] == st.st_size and known["mtime_ns"] == st.st_mtime_ns:
            await self._done_unchanged(relative, known["content_hash"], known["document_id"])
            return None
        item = await self.documents.read_file(path, None, None, {"folder_path": relative}, relative=relative)
        digest = content_hash(item.content)
        if known is not None and known["content_hash"] == digest:
            await self._remember(relative, st.st_size, st.st_mtime_ns, digest, known["document_id"])
            await self._done_unchanged(relative, digest, known["document_id"])
            return None
        if known is None and await self._rename(relative, st.st_size, st.st_mtime_ns, digest, item):
            return None
        return relative, st.st_size, st.st_mtime_ns, digest, item

    async def _done_unchanged(self, relative: str, digest: str, document_id: Any) -> None:
        row = RowResult("done", outcome="unchanged", content_hash=digest, document_id=document_id)
        await self.frontier.finish_row(relative, row)

    async def _rename(self, relative: str, size: int, mtime_ns: int, digest: str, item: NewDocument) -> bool:
        """A new path holding the content of a path gone from disk: move its document, embed nothing."""
        old = await self.pool.fetchrow(
            "SELECT url, document_id FROM crawl_frontier WHERE job_id = $1 AND origin = 'missing' "
            "AND state IN ('pending', 'fetching') AND content_hash = $2 ORDER BY seq LIMIT 1",
            self.job.id,
            digest,
        )
        if old is None:
            return False
        document_id = old["document_id"]
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                chunks = await self.documents.move(document_id, item, conn=conn)
                await conn.execute(
                    "DELETE FROM folder_files WHERE source_id = $1 AND path = $2", self.job.source_id, old["url"]
                )
                await self._remember(relative, size, mtime_ns, digest, document_id, conn)
        except asyncpg.UniqueViolationError:  # another document already has the new path's URL
            return False
        self.manifest.pop(old["url"], None)
        await self.frontier.finish_row(old["url"], RowResult("gone", error=short_error(f"renamed to {relative}")))
        result = RowResult("done", outcome="updated", document_id=document_id, content_hash=digest, chunks=chunks)
        await self.frontier.finish_row(relative, result)
        return True

    async def _remember(
        self, relative: str, size: int, mtime_ns: int, digest: str, document_id: Any, conn: Any = None
    ) -> None:
        await (conn or self.pool).execute(
            "INSERT INTO folder_files (source_id, path, size, mtime_ns, content_hash, document_id) "
            "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (source_id, path) DO UPDATE SET size = $3, "
            "mtime_ns = $4, content_hash = $5, document_id = $6, synced_at = now()",
            self.job.source_id,
            relative,
            size,
            mtime_ns,
            digest,
            document_id,
        )

    # ---------- deleted files ----------

    async def _remove(self, root: Path, relative: str) -> None:
        """A path gone from the folder: forget it, and delete its document unless another path shares it."""
        if self.config is not None and self.config.wants(relative) and (root / relative).is_file():
            await self.frontier.finish_row(relative, RowResult("skipped", skip_reason="reappeared"))
            return
        document_id = await self.pool.fetchval(
            "DELETE FROM folder_files WHERE source_id = $1 AND path = $2 RETURNING document_id",
            self.job.source_id,
            relative,
        )
        self.manifest.pop(relative, None)
        deleted = False
        shared = document_id is not None and await self.pool.fetchval(
            "SELECT EXISTS (SELECT 1 FROM folder_files WHERE document_id = $1)", document_id
        )
        if document_id is not None and not shared:
            try:
                await self.documents.delete(document_id)
                deleted = True
            except NotFound:
                pass
        await self.frontier.finish_row(
            relative, RowResult("gone", outcome="deleted" if deleted else None, error="deleted from the folder")
        )

    # ---------- the end ----------

    async def _mark_synced(self) -> None:
        """Record on the source that a sync completed."""
        await self.pool.execute(
            "UPDATE source_folders SET last_synced_at = now() WHERE source_id = $1", self.job.source_id
        )
