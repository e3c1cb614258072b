"""Folder sources: a source bound to a directory, kept in sync by background `sync` jobs.

A sync job is a job of kind 'sync' in the job queue (services/jobs/) next to crawl jobs, so it is
watched, listed and cancelled the same way; its files are rows of its frontier (url = path relative to
the folder). services/sync/runner.py runs one; services/sync/watch.py queues them when files change.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from uuid import UUID

from models import Source
from models.jobs import FolderSyncParams, StartedJob, SyncRequest
from services.access.job_limits import scoped_ids
from services.access.paths import resolve_caller_path
from services.core.database import Database
from services.core.errors import InvalidArgument, NotFound
from services.core.settings import Settings
from services.core.validation import check_patterns
from services.jobs.queue import JobQueue
from services.sources.service import LIST_HINT, SourceService
from services.sync.scan import FolderConfig

FOLDER_COLUMNS = "source_id, path, include_patterns, exclude_patterns, recursive"


class SyncService:
    """Bind directories to sources and queue their syncs."""

    def __init__(self, db: Database, settings: Settings, sources: SourceService, jobs: JobQueue) -> None:
        self.db = db
        self.settings = settings
        self.sources = sources
        self.jobs = jobs
        #: Set when a folder is bound in this process, so the watcher need not wait for its refresh.
        self.bound = asyncio.Event()

    def check_directory(self, path: str | None) -> Path:
        if not path or not str(path).strip():
            raise InvalidArgument("folder_path is required.", "Pass the directory to keep in sync, e.g. '~/notes'.")
        resolved = resolve_caller_path(str(path), self.settings.allowed_paths)  # the binder's roots
        if not resolved.is_dir():
            raise InvalidArgument(
                f"{path} is not a directory.", "Pass a directory; ingest single files with manage_document."
            )
        return resolved

    async def bind(
        self,
        path: str | None,
        source_id: str | UUID | None = None,
        title: str | None = None,
        include_patterns: list[str] | None = None,
        exclude_patterns: list[str] | None = None,
        recursive: bool | None = None,
    ) -> tuple[FolderConfig, bool]:
        """Bind a directory to a source (given, already bound to it, or new, titled after the directory).
        Returns the binding and whether a source was created. Given patterns/recursive replace the old ones."""
        directory = self.check_directory(path)
        include = check_patterns(include_patterns, "include_patterns") if include_patterns is not None else None
        exclude = check_patterns(exclude_patterns, "exclude_patterns") if exclude_patterns is not None else None
        created = False
        if source_id:
            source = await self.sources.get(source_id)
        else:
            row = await self.db.pool.fetchrow(  # only the caller's: another tenant's binding is no oracle
                "SELECT source_id FROM source_folders WHERE path = $1 "
                "AND ($2::uuid[] IS NULL OR source_id = ANY($2::uuid[])) ORDER BY created_at LIMIT 1",
                str(directory),
                scoped_ids(),
            )
            if row is not None:
                source = await self.sources.get(row["source_id"])
            else:
                name = (title or "").strip() or directory.name or str(directory)
                source = await self.sources.create(name, url=directory.as_uri(), source_type="folder")
                created = True
        await self.db.pool.execute(
            "INSERT INTO source_folders (source_id, path, include_patterns, exclude_patterns, recursive) "
            "VALUES ($1, $2, coalesce($3, '{}'::text[]), coalesce($4, '{}'::text[]), coalesce($5, true)) "
            "ON CONFLICT (source_id) DO UPDATE SET path = EXCLUDED.path, "
            "include_patterns = coalesce($3, source_folders.include_patterns), "
            "exclude_patterns = coalesce($4, source_folders.exclude_patterns), "
            "recursive = coalesce($5, source_folders.recursive)",
            source.id,
            str(directory),
            include,
            exclude,
            recursive,
        )
        if source.source_type != "folder" or source.url != directory.as_uri():
            await self.db.pool.execute(
                "UPDATE sources SET source_type = 'folder', url = $2, updated_at = now() WHERE id = $1",
                source.id,
                directory.as_uri(),
            )
        self.bound.set()
        return await self.folder(source.id), created

    async def folder(self, source_id: str | UUID | None) -> FolderConfig:
        source: Source = await self.sources.get(source_id)
        row = await self.db.pool.fetchrow(
            f"SELECT {FOLDER_COLUMNS} FROM source_folders WHERE source_id = $1", source.id
        )
        if row is None:
            raise InvalidArgument(
                f"Source '{source.title[:200]}' is not bound to a folder.",
                "Bind one with crawl_website(action='sync', folder_path=..., source_id=...).",
            )
        return FolderConfig(**dict(row))

    async def folders(self) -> list[FolderConfig]:
        rows = await self.db.pool.fetch(f"SELECT {FOLDER_COLUMNS} FROM source_folders ORDER BY created_at")
        return [FolderConfig(**dict(r)) for r in rows]

    async def find(self, reference: str) -> FolderConfig:
        """A folder source by id, by title, or by its directory (for the command line)."""
        try:
            return await self.folder(UUID(reference.strip()))
        except ValueError:
            pass
        row = await self.db.pool.fetchrow(
            "SELECT f.source_id FROM source_folders f JOIN sources s ON s.id = f.source_id "
            "WHERE lower(s.title) = lower($1) ORDER BY f.created_at LIMIT 1",
            reference,
        )
        if row is None and Path(reference).expanduser().is_dir():
            resolved = str(Path(reference).expanduser().resolve())
            row = await self.db.pool.fetchrow("SELECT source_id FROM source_folders WHERE path = $1", resolved)
        if row is None:
            raise NotFound(f"No folder source matches '{reference[:200]}'.", LIST_HINT)
        return await self.folder(row["source_id"])

    async def queue(self, source_id: str | UUID | None) -> StartedJob:
        """Queue a sync of a folder source; a sync already queued for it is returned instead."""
        config = await self.folder(source_id)
        queued = await self.jobs.queued(config.source_id, "sync")
        if queued is not None:
            return StartedJob(job=queued, notes=["A sync of this folder was already queued."])
        params = FolderSyncParams(
            path=config.path,
            recursive=config.recursive,
            include_patterns=config.include_patterns,
            exclude_patterns=config.exclude_patterns,
        )
        return StartedJob(job=await self.jobs.insert(config.source_id, "sync", params.model_dump()))

    async def sync(self, request: SyncRequest) -> StartedJob:
        """Bind `request.folder_path` (see `bind`), then queue a sync of its source."""
        config, created = await self.bind(
            request.folder_path,
            request.source_id,
            request.title,
            request.include_patterns,
            request.exclude_patterns,
            request.recursive,
        )
        started = await self.queue(config.source_id)
        started.source_created = created
        return started
