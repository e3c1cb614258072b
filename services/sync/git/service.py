"""GitService: bind repositories to sources and queue their syncs (jobs of kind `git`, shown as syncs)."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path
from uuid import UUID

from models import Source
from models.jobs import GitSyncParams, GitSyncRequest, StartedJob
from services.access.job_limits import scoped_ids
from services.core.database import Database
from services.core.errors import InvalidArgument, NotFound
from services.core.settings import Settings
from services.core.validation import check_patterns
from services.jobs.queue import JobQueue
from services.net.safety import check_url_allowed
from services.sources.service import LIST_HINT, SourceService
from services.sources.versions import tag_version
from services.sync.git.config import (
    GitConfig,
    check_auth_env,
    check_browse_url,
    check_git_url,
    check_ref,
    default_title,
)

logger = logging.getLogger(__name__)

GIT_COLUMNS = (
    "source_id, url, ref, include_patterns, exclude_patterns, auth_env, browse_url, last_commit, "
    "last_patterns, syncing_commit, last_synced_at"
)
BIND_HINT = "Bind one with crawl_website(action='sync', git_url=..., source_id=...)."


class GitService:
    """Git sources: a source bound to one ref of a remote repository."""

    def __init__(self, db: Database, settings: Settings, sources: SourceService, jobs: JobQueue) -> None:
        self.db = db
        self.settings = settings
        self.sources = sources
        self.jobs = jobs

    async def bind(
        self,
        git_url: str | None,
        source_id: str | UUID | None = None,
        title: str | None = None,
        ref: str | None = None,
        include_patterns: list[str] | None = None,
        exclude_patterns: list[str] | None = None,
        auth_env: str | None = None,
        browse_url: str | None = None,
    ) -> tuple[GitConfig, bool]:
        """Bind a repository to a source (given, already following this URL and ref, or new, titled
        `org/repo`). Returns the binding and whether a source was created. Given settings replace the
        old ones; a new URL or ref makes the next sync compare every file."""
        url = check_git_url(git_url)
        await check_url_allowed(url, self.settings.git_allow_private, purpose="git")
        wanted_ref = check_ref(ref) if ref is not None and str(ref).strip() else None  # None: keep (new: HEAD)
        include = check_patterns(include_patterns, "include_patterns") if include_patterns is not None else None
        exclude = check_patterns(exclude_patterns, "exclude_patterns") if exclude_patterns is not None else None
        env_name = check_auth_env(auth_env)
        template = check_browse_url(browse_url)
        source, created = await self._source(url, wanted_ref, source_id, title)
        await self.db.pool.execute(
            "INSERT INTO source_git (source_id, url, ref, include_patterns, exclude_patterns, auth_env, browse_url) "
            "VALUES ($1, $2, coalesce($3, 'HEAD'), coalesce($4, '{}'::text[]), coalesce($5, '{}'::text[]), $6, $7) "
            "ON CONFLICT (source_id) DO UPDATE SET last_commit = CASE WHEN source_git.url = $2 "
            "AND source_git.ref = coalesce($3, source_git.ref) THEN source_git.last_commit END, "
            "url = $2, ref = coalesce($3, source_git.ref), "
            "include_patterns = coalesce($4, source_git.include_patterns), "
            "exclude_patterns = coalesce($5, source_git.exclude_patterns), "
            "auth_env = coalesce($6, source_git.auth_env), browse_url = coalesce($7, source_git.browse_url)",
            source.id,
            url,
            wanted_ref,
            include,
            exclude,
            env_name,
            template,
        )
        config = await self.config(source.id)
        await self.show(config, source.source_type != "git" or source.url != url)
        return config, created

    async def sync(self, request: GitSyncRequest) -> StartedJob:
        """Bind `request.git_url` first when given (see `bind`), then queue a sync of the source: what
        crawl_website(action='sync', git_url=...) and `archivist sync --git URL` ask for."""
        created = False
        source_id = request.source_id
        if request.git_url:
            config, created = await self.bind(
                request.git_url,
                request.source_id,
                request.title,
                request.ref,
                request.include_patterns,
                request.exclude_patterns,
                request.auth_env,
                request.browse_url,
            )
            source_id = config.source_id
        started = await self.queue(source_id)
        started.source_created = created
        return started

    async def _source(
        self, url: str, ref: str | None, source_id: str | UUID | None, title: str | None
    ) -> tuple[Source, bool]:
        """The given source, else the one following this URL (and ref, when given), else a new one."""
        if source_id:
            source = await self.sources.get(source_id)
            if source.source_type == "folder":
                raise InvalidArgument(
                    f"Source '{source.title[:200]}' is a folder source.", "Bind the repository to a new source."
                )
            return source, False
        row = await self.db.pool.fetchrow(
            "SELECT source_id FROM source_git WHERE url = $1 AND ($2::text IS NULL OR ref = $2) "
            "AND ($3::uuid[] IS NULL OR source_id = ANY($3::uuid[])) ORDER BY created_at LIMIT 1",
            url,
            ref,
            scoped_ids(),  # only the caller's: another tenant's repository is no oracle
        )
        if row is not None:
            return await self.sources.get(row["source_id"]), False
        name = (title or "").strip() or default_title(url, ref or "HEAD")
        version = tag_version(ref)  # a release tag: this source is that version (services/sources/versions.py)
        return await self.sources.create(name, url=url, source_type="git", version=version), True

    async def show(self, config: GitConfig, retype: bool = False) -> None:
        """Mirror the binding into the source's metadata (what manage_source get shows)."""
        await self.db.pool.execute(
            "UPDATE sources SET metadata = metadata || $2, "
            "source_type = CASE WHEN $3 THEN 'git' ELSE source_type END, "
            "url = CASE WHEN $3 THEN $4 ELSE url END, updated_at = now() WHERE id = $1",
            config.source_id,
            config.summary(),
            retype,
            config.url,
        )

    async def config(self, source_id: str | UUID | None) -> GitConfig:
        source = await self.sources.get(source_id)
        row = await self.db.pool.fetchrow(f"SELECT {GIT_COLUMNS} FROM source_git WHERE source_id = $1", source.id)
        if row is None:
            raise InvalidArgument(f"Source '{source.title[:200]}' is not bound to a git repository.", BIND_HINT)
        return GitConfig(**dict(row))

    async def find(self, reference: str) -> GitConfig:
        """A git source by id, by title, or by its clone URL (for the command line)."""
        try:
            return await self.config(UUID(reference.strip()))
        except ValueError:
            pass
        row = await self.db.pool.fetchrow(
            "SELECT g.source_id FROM source_git g JOIN sources s ON s.id = g.source_id "
            "WHERE lower(s.title) = lower($1) OR g.url = $1 ORDER BY g.created_at LIMIT 1",
            reference.strip(),
        )
        if row is None:
            raise NotFound(f"No git source matches '{reference[:200]}'.", LIST_HINT)
        return await self.config(row["source_id"])

    async def is_git(self, source_id: str | UUID | None) -> bool:
        return (await self.sources.get(source_id)).source_type == "git"

    async def queue(self, source_id: str | UUID | None) -> StartedJob:
        """Queue a sync of a git source; a sync already queued for it is returned instead."""
        config = await self.config(source_id)
        check_auth_env(config.auth_env)  # a variable unset since binding: say so now, not in the job
        queued = await self.jobs.queued(config.source_id, "git")
        if queued is not None:
            return StartedJob(job=queued, notes=["A sync of this repository was already queued."])
        params = GitSyncParams(
            url=config.url, include_patterns=config.include_patterns, exclude_patterns=config.exclude_patterns
        )
        secrets = [config.auth_env] if config.auth_env else []  # only a worker holding the token can fetch
        job = await self.jobs.insert(config.source_id, "git", params.model_dump(), secret_names=secrets)
        return StartedJob(job=job)

    async def prune_clones(self) -> int:
        """Remove the clones of sources that are no longer git sources (deleting a source leaves its
        clone behind); returns how many went."""
        root = Path(self.settings.data_dir) / "git"
        if not root.is_dir():
            return 0
        found: dict[UUID, Path] = {}
        for directory in root.iterdir():
            try:
                found[UUID(directory.name)] = directory
            except ValueError:
                continue
        rows = await self.db.pool.fetch(
            "SELECT source_id FROM source_git WHERE source_id = ANY($1::uuid[])", list(found)
        )
        stale = [found[sid] for sid in set(found) - {r["source_id"] for r in rows}]
        for directory in stale:
            logger.info("removing the clone of a deleted git source: %s", directory)
            await asyncio.to_thread(shutil.rmtree, directory, True)
        return len(stale)
