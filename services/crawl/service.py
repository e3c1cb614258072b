"""Crawls: validate a crawl request and queue it (start, or recrawl a source with its last settings).

The crawl half of the job service: services/jobs/queue.py holds the queue itself (every kind),
services/crawl/runner.py runs a claimed crawl.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from models.jobs import CRAWL_KINDS, CrawlJob, CrawlParams, CrawlRequest, StartedJob
from services.core.database import Database
from services.core.errors import Conflict, InvalidArgument
from services.core.settings import Settings
from services.crawl.params import build_params, check_start_url, default_source_title
from services.crawl.politeness import HostThrottle, SharedHostGate
from services.jobs.queue import JobQueue
from services.net.credentials import same_host
from services.net.safety import check_url_allowed
from services.sources.service import SourceService


class CrawlService:
    """Start and repeat crawls; holds the process's per-host throttle that every crawl shares."""

    def __init__(self, db: Database, settings: Settings, sources: SourceService, queue: JobQueue) -> None:
        self.db = db
        self.settings = settings
        self.sources = sources
        self.queue = queue
        self._throttle: HostThrottle | None = None

    def build_params(self, request: CrawlRequest) -> tuple[CrawlParams, list[str]]:
        """Check a crawl request (see `services.crawl.params.build_params`): parameters and notes."""
        return build_params(self.settings, request)

    async def start(self, request: CrawlRequest) -> StartedJob:
        """Check and queue a crawl; the source is `request.source_id`, else found or created by title
        (default: the host). Headers / cookies are `env:NAME` references (documentation behind a login)."""
        params, notes = self.build_params(request)
        await check_url_allowed(params.url, self.settings.crawl_allow_private)
        if request.source_id:
            sid, created = (await self.sources.get(request.source_id)).id, False
        else:
            source_title = (request.title or "").strip() or default_source_title(params.url)
            source, created = await self.sources.get_or_create(
                source_title, source_type="crawl", url=params.url, must_exist=bool(request.source_must_exist)
            )
            sid = source.id
        job = await self._insert(sid, "crawl", params, created)
        return StartedJob(job=job, source_created=created, notes=notes)

    async def recrawl(self, request: CrawlRequest) -> StartedJob:
        """Queue a new crawl of a source with the settings of its last crawl (or of `request.job_id`);
        what the request sets replaces them; header and cookie references are reused. With only a URL,
        the source is the one last crawled from that URL."""
        sid, previous = await self._previous(request)
        await self._refuse_if_active(sid)
        original = CrawlParams(**previous)
        given = request.given()
        merged = {**original.model_dump(exclude={"kind"}), **given, "url": request.url or original.url}
        moved = not same_host(merged["url"], original.url) and (original.headers or original.cookies)
        if moved and "headers" not in given and "cookies" not in given:  # a login never follows to another host
            merged.update(headers={}, cookies={}, auth_hosts=[])
            login_note = ["The crawl moved to another host: its login headers and cookies were not carried over."]
        else:
            login_note = []
        params, notes = self.build_params(CrawlRequest(**merged))
        await check_url_allowed(params.url, self.settings.crawl_allow_private)
        job = await self._insert(sid, "recrawl", params)
        return StartedJob(job=job, notes=notes + login_note)

    async def _previous(self, request: CrawlRequest) -> tuple[UUID, Mapping[str, Any]]:
        """The source to recrawl and the parameters of the crawl to repeat."""
        source_id, url = request.source_id, request.url
        if request.job_id:
            previous = await self.queue.get(request.job_id)
            sid, raw_params = previous.source_id, previous.shown_params.model_dump()
        elif source_id or url:
            sid = (await self.sources.get(source_id)).id if source_id else None
            row: Mapping[str, Any] | None = await self.queue.latest(
                CRAWL_KINDS, sid, None if sid else check_start_url(url)
            )
            if row is None and source_id and url:
                row = {"source_id": sid, "params": {"url": url}}
            if row is None:
                raise InvalidArgument(
                    f"{'Source ' + str(source_id) if source_id else url} has never been crawled, so there is "
                    "nothing to re-crawl.",
                    "Start a crawl with crawl_website(action='start', url=..., source_id=...).",
                )
            sid, raw_params = row["source_id"], row["params"]
        else:
            raise InvalidArgument(
                "recrawl needs source_id, job_id or url.", "Pass the source_id of a crawled source, or a job_id."
            )
        if sid is None:  # a failed crawl whose empty source was removed
            raise InvalidArgument(
                "That crawl stored nothing and its source was removed, so there is nothing to re-crawl.",
                "Start a new crawl with crawl_website(action='start', url=...).",
            )
        return sid, raw_params

    async def _refuse_if_active(self, source_id: UUID) -> None:
        active = await self.queue.active(source_id)
        if active is not None:
            raise Conflict(
                f"A crawl of this source is already {active['status']} (job {active['id']}).",
                f"Watch it with crawl_website(action='status', job_id='{active['id']}'), or cancel it first.",
            )

    async def _insert(self, source_id: UUID, kind: str, params: CrawlParams, created: bool = False) -> CrawlJob:
        return await self.queue.insert(source_id, kind, params.model_dump(), created_source=created)

    @property
    def throttle(self) -> HostThrottle:
        """One throttle per process, so per-host limits hold across jobs crawling the same host."""
        if self._throttle is None:
            shared = SharedHostGate(self.db.dsn, self.settings.crawl_concurrency) if self.db.dsn else None
            self._throttle = HostThrottle(
                self.settings.crawl_per_host_concurrency,
                self.settings.crawl_delay_seconds,
                self.settings.crawl_concurrency,
                shared=shared,
            )
        return self._throttle

    async def close(self) -> None:
        if self._throttle is not None:
            await self._throttle.close()
