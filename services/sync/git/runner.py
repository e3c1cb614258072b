"""Runs one sync job of a git source: fetch, plan, ingest changed files, move renamed ones, drop deleted.

Seeding (once per job) fetches the ref into the source's bare clone, plans the sync (services/sync/
git/tree.py) and writes the plan as frontier rows: a file to (re)ingest is a pending row (depth 0;
`final_url` holds the path it was renamed from), a path to forget a pending row of origin 'missing'
(depth 1, after every file). The commit being synced is kept on the source, so a job handed back to
the queue resumes the same plan. `git_files` (path -> blob, document) is the manifest of what is
stored; a changed file keeps its document (its URL moves to the new commit before it is ingested
again), a renamed one too (nothing is re-embedded when its content is the same).
One sync per source at a time, and the end, are SourceSync's (services/sync/runner.py); cancel,
hand-back and heartbeat are every job's (services/jobs/run.py).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any
from uuid import UUID

import asyncpg
from dulwich.repo import Repo

from services.core.errors import NotFound, ServiceError
from services.documents import NewDocument
from services.jobs.frontier import RowResult
from services.jobs.queue import JobQueue
from services.jobs.run import Claim, short_error
from services.parsers.isolation import parser_pool
from services.sync.git.config import GitConfig, read_credentials
from services.sync.git.objects import commit_at
from services.sync.git.remote import Fetch, FetchFailed, fetch_ref, open_clone
from services.sync.git.service import GitService
from services.sync.git.tree import Plan, bounded, lookup_blob, plan_sync
from services.sync.runner import BATCH, SourceSync, SyncFailed, SyncTools

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stored:
    """A manifest row: the blob last stored for a path, and its document."""

    blob: str
    document_id: UUID


@dataclass
class Pending:
    """A file read and parsed, waiting for the batch's one ingest call."""

    path: str
    blob: str
    item: NewDocument
    previous: str | None  # the manifest path whose document it takes over (itself, or the renamed one)


class GitSyncRunner(SourceSync):
    """Runs one claimed sync of a git source."""

    git: GitConfig
    commit: str
    repo: Repo | None = None
    tree: bytes
    files: dict[str, Stored]

    def __init__(self, claim: Claim, queue: JobQueue, tools: SyncTools, repositories: GitService) -> None:
        super().__init__(claim, queue, tools)
        self.repositories = repositories

    async def _sync(self) -> None:
        self.git = await self.repositories.config(self.job.source_id)
        await self.frontier.recover()
        self.files = await self._manifest()
        await self._seed_git()
        self.repo = await asyncio.to_thread(open_clone, self.git.directory(self.settings.data_dir))
        try:
            commit = (
                commit_at(self.repo.object_store, self.commit.encode()) if self.commit.encode() in self.repo else None
            )
            if commit is None:  # the clone was removed while the job waited in the queue
                raise SyncFailed(f"Commit {self.commit[:12]} is not in the clone any more; sync again.")
            self.tree = commit.tree
            while not self.interrupt.is_set():
                rows = await self.frontier.claim(BATCH)
                if not rows:
                    break
                await self._sync_paths([r.url for r in rows if r.origin != "missing"])
                for row in rows:
                    if row.origin == "missing":
                        await self._forget_row(row.url)
        finally:
            self.repo.close()
        if not self.interrupt.is_set():  # every file is keyword-searchable: embed the rest, then complete
            await self.documents.backlog.drain(await self.frontier.written_documents(), self.interrupt)

    async def _manifest(self) -> dict[str, Stored]:
        rows = await self.pool.fetch(
            "SELECT path, blob, document_id FROM git_files WHERE source_id = $1", self.job.source_id
        )
        return {r["path"]: Stored(r["blob"], r["document_id"]) for r in rows}

    # ---------- seeding ----------

    async def _seed_git(self) -> None:
        if await self.queue.seeded(self.job.id):
            if self.git.syncing_commit:
                self.commit = self.git.syncing_commit
                return
        try:
            await self.repositories.prune_clones()
        except OSError as exc:  # housekeeping must not stop a sync
            logger.warning("git sync %s: could not remove old clones: %s", self.job.id, exc)
        self.commit = await self._fetch()
        plan, warnings = await asyncio.to_thread(self._plan)
        self.warnings.extend(warnings)
        rows = [(path, 0, "file", source) for path, source in plan.files]
        rows += [(path, 1, "missing", None) for path in plan.gone]
        logger.info(
            "git sync %s: %s at %s, %d files to ingest, %d to forget%s",
            self.job.id,
            self.git.url,
            self.commit[:12],
            len(plan.files),
            len(plan.gone),
            " (every file compared)" if plan.full else "",
        )
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO crawl_frontier (job_id, url, depth, origin, final_url) SELECT $1, t.url, t.depth, "
                "t.origin, t.renamed FROM unnest($2::text[], $3::int[], $4::text[], $5::text[]) "
                "AS t(url, depth, origin, renamed) ON CONFLICT DO NOTHING",
                self.job.id,
                *[list(column) for column in zip(*rows, strict=True)] if rows else [[]] * 4,
            )
            await conn.execute(
                "UPDATE source_git SET syncing_commit = $2 WHERE source_id = $1", self.job.source_id, self.commit
            )
            await self.queue.mark_seeded(self.job.id, conn)

    async def _fetch(self) -> str:
        credentials = read_credentials(self.git.auth_env)  # InvalidArgument naming the variable
        directory = self.git.directory(self.settings.data_dir)
        settings = self.settings
        fetch = Fetch(
            directory,
            self.git.url,
            self.git.ref,
            credentials,
            settings.git_allow_private,
            settings.git_timeout_seconds,
            settings.git_max_pack_mb * 1024 * 1024,
            settings.max_file_bytes,
        )
        try:
            return await fetch_ref(fetch, parser_pool(settings))
        except FetchFailed as exc:
            raise SyncFailed(str(exc)) from None

    def _plan(self) -> tuple[Plan, list[str]]:
        repo = open_clone(self.git.directory(self.settings.data_dir))
        try:
            manifest = {path: stored.blob for path, stored in self.files.items()}
            settings = self.settings
            return plan_sync(
                repo.object_store, self.git, self.commit, manifest, settings.sync_max_files, settings.max_file_bytes
            )
        finally:
            repo.close()

    # ---------- files ----------

    async def _sync_paths(self, paths: list[str]) -> None:
        if not paths:
            return
        renamed = dict(
            await self.pool.fetch(
                "SELECT url, final_url FROM crawl_frontier WHERE job_id = $1 AND url = ANY($2::text[])",
                self.job.id,
                paths,
            )
        )
        batch: list[Pending] = []
        for path in paths:
            try:
                pending = await self._read(path, renamed.get(path))
            except ServiceError as exc:
                await self._failed(path, renamed.get(path), exc.message)
                continue
            except Exception as exc:  # a parser bug must not stop the sync
                logger.exception("git sync %s: failed to read %s", self.job.id, path)
                await self._failed(path, renamed.get(path), f"unexpected error: {type(exc).__name__}")
                continue
            if pending is not None:
                batch.append(pending)
        if batch:
            await self._ingest(batch)

    async def _read(self, path: str, renamed_from: str | None) -> Pending | None:
        """Settle a file that needs no embedding (unchanged, renamed as is); else what to ingest. A blob
        over the file cap fails here, from its header, before it is inflated (OverBudget)."""
        assert self.repo is not None
        store = bounded(self.repo.object_store, self.settings.max_file_bytes)
        blob = await asyncio.to_thread(lookup_blob, store, self.tree, path)
        if blob is None:
            await self.frontier.finish_row(path, RowResult("skipped", skip_reason="vanished"))
            return None
        sha = blob.id.decode()
        previous = path if path in self.files else renamed_from if renamed_from in self.files else None
        stored = self.files.get(previous) if previous else None
        if stored is not None and stored.blob == sha and previous == path:  # settled before a hand-back
            await self.frontier.finish_row(path, RowResult("done", outcome="unchanged", document_id=stored.document_id))
            return None
        item = await self._parse(blob.data, path)
        if stored is not None and previous is not None and stored.blob == sha:
            await self._move(previous, path, sha, stored.document_id, item)
            return None
        return Pending(path, sha, item, previous)

    async def _parse(self, data: bytes, path: str) -> NewDocument:
        url = self.git.document_url(self.commit, path)
        metadata = {"repository": self.git.url, "ref": self.git.ref, "path": path, "commit": self.commit}
        return await self.documents.parse_file(data, PurePosixPath(path), path, None, url, metadata, relative=path)

    async def _move(self, old: str, new: str, blob: str, document_id: UUID, item: NewDocument) -> None:
        """A file renamed with its content unchanged: its document moves, nothing is re-embedded."""
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                chunks = await self.documents.move(document_id, item, conn=conn)
                await self._remember(conn, new, blob, document_id, replacing=old)
        except asyncpg.UniqueViolationError:  # another document already has the new URL: ingest instead
            await self._ingest([Pending(new, blob, item, old)])
            return
        result = RowResult("done", outcome="updated", document_id=document_id, chunks=chunks)
        await self.frontier.finish_row(new, result)

    async def _ingest(self, batch: list[Pending]) -> None:
        """One ingest call for the batch; a changed file's document first takes its new URL, so the
        ingest replaces it in place (same id) instead of adding a document."""
        for pending in batch:
            if pending.previous is not None and not self._shared(pending.previous):
                try:  # the document takes the file's URL at the synced commit; its title follows at ingest
                    await self.documents.move(self.files[pending.previous].document_id, pending.item, retitle=False)
                except asyncpg.UniqueViolationError:
                    pass  # a document already has that URL: the ingest updates that one
        items = [p.item for p in batch]
        results = await self.documents.ingest_many(self.source_id, items, embed=False)  # the backlog embeds
        for pending, result in zip(batch, results, strict=True):
            old = self.files.get(pending.previous) if pending.previous else None
            async with self.pool.acquire() as conn, conn.transaction():
                await self._remember(conn, pending.path, pending.blob, result.document.id, replacing=pending.previous)
            if old is not None and old.document_id != result.document.id:
                await self._release(old.document_id)
            row = RowResult(
                "done",
                outcome=result.status,
                document_id=result.document.id,
                content_hash=pending.blob,
                chunks=result.document.chunk_count,
                chunks_embedded=result.chunks_created,
            )
            await self.frontier.finish_row(pending.path, row)

    def _shared(self, path: str) -> bool:
        """Whether the document of `path` also holds another path (identical files share one)."""
        document_id = self.files[path].document_id
        return any(p != path and s.document_id == document_id for p, s in self.files.items())

    async def _remember(self, conn: Any, path: str, blob: str, document_id: UUID, replacing: str | None) -> None:
        if replacing is not None and replacing != path:
            await conn.execute(
                "DELETE FROM git_files WHERE source_id = $1 AND path = $2", self.job.source_id, replacing
            )
            self.files.pop(replacing, None)
        await conn.execute(
            "INSERT INTO git_files (source_id, path, blob, document_id) VALUES ($1, $2, $3, $4) "
            "ON CONFLICT (source_id, path) DO UPDATE SET blob = $3, document_id = $4, synced_at = now()",
            self.job.source_id,
            path,
            blob,
            document_id,
        )
        self.files[path] = Stored(blob, document_id)

    async def _failed(self, path: str, renamed_from: str | None, message: str) -> None:
        """A file that cannot be read at this commit: what was stored for it is out of date, so it goes."""
        for stale in {p for p in (path, renamed_from) if p} & set(self.files):
            await self._forget(stale)
        await self.frontier.finish_row(path, RowResult("failed", error=short_error(message)))

    # ---------- deleted files ----------

    async def _forget_row(self, path: str) -> None:
        deleted = await self._forget(path) if path in self.files else False
        error = "deleted from the repository (or no longer matched)"
        await self.frontier.finish_row(path, RowResult("gone", outcome="deleted" if deleted else None, error=error))

    async def _forget(self, path: str) -> bool:
        """Drop a path from the manifest; its document goes unless another path still holds it."""
        await self.pool.execute("DELETE FROM git_files WHERE source_id = $1 AND path = $2", self.job.source_id, path)
        stored = self.files.pop(path)
        return await self._release(stored.document_id)

    async def _release(self, document_id: UUID) -> bool:
        if any(s.document_id == document_id for s in self.files.values()):
            return False
        try:
            await self.documents.delete(document_id)
        except NotFound:
            return False
        return True

    # ---------- the end ----------

    async def _mark_synced(self) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "UPDATE source_git SET last_commit = $2, last_patterns = $3, syncing_commit = NULL, "
                "last_synced_at = now() WHERE source_id = $1 RETURNING last_synced_at",
                self.job.source_id,
                self.commit,
                self.git.patterns_key(),
            )
        await self.repositories.show(replace(self.git, last_commit=self.commit, last_synced_at=row["last_synced_at"]))
