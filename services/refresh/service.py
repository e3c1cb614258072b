"""One call refreshes a source by its kind: a crawl is re-crawled, a folder or git source synced.

The edges (crawl_website's recrawl and sync actions, the CLI, the console) build a request and call
`SourceRefresh.refresh`; which kind of job a source's refresh is, is decided here, once, from the
request and the source (services/crawl/service.py queues crawls, services/sync/ folder and git syncs).
"""

from __future__ import annotations

from models.jobs import CrawlRequest, GitSyncRequest, StartedJob, SyncRequest
from services.core.errors import InvalidArgument
from services.crawl.service import CrawlService
from services.sources.service import SourceService
from services.sync import SyncService
from services.sync.git import GitService

#: the kinds of source a sync refreshes (every other source is re-crawled)
SYNCED_KINDS = ("folder", "git")


class SourceRefresh:
    """Refresh a source by its kind (see the module docstring)."""

    def __init__(self, sources: SourceService, crawl: CrawlService, folders: SyncService, git: GitService) -> None:
        self.sources = sources
        self.crawl = crawl
        self.folders = folders
        self.git = git

    async def refresh(self, request: CrawlRequest, sync: SyncRequest | GitSyncRequest | None = None) -> StartedJob:
        """Queue the job that brings a source up to date: a recrawl (a source, a job or a URL), or, for a
        source that is a folder or a git repository, its sync (`sync`, the same call asked as a sync)."""
        if request.source_id and not request.job_id:
            source = await self.sources.get(request.source_id)
            if source.source_type in SYNCED_KINDS:
                return await self.sync(sync or SyncRequest(source_id=source.id))
        return await self.crawl.recrawl(request)

    async def sync(self, request: SyncRequest | GitSyncRequest) -> StartedJob:
        """Queue a sync: a git sync (binding `git_url` first when given), a folder sync (binding
        `folder_path` first when given), or the sync of the source `source_id` by its kind."""
        if isinstance(request, GitSyncRequest):
            if request.git_url or not request.source_id:
                return await self.git.sync(request)
            request = SyncRequest(source_id=request.source_id)
        if request.folder_path:
            return await self.folders.sync(request)
        if not request.source_id:
            raise InvalidArgument(
                "sync needs folder_path (to bind a folder) or the source_id of a folder source.",
                "Pass folder_path='~/notes' (a directory under the allowed paths), or source_id=...",
            )
        if await self.git.is_git(request.source_id):
            return await self.git.queue(request.source_id)
        return await self.folders.queue(request.source_id)
