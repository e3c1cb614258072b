"""Crawl jobs: queue, inspect, wait for, cancel and repeat crawls; the claim/heartbeat API for workers.

A job is a row in `crawl_jobs`; its pages live in `crawl_frontier` (see services/crawl/runner.py, which runs
one job). Counters are computed from the frontier on every read, so they are exact even after a worker
died mid-crawl and another one resumed the job.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

import asyncpg

from models import Page
from models.jobs import ACTIVE_STATUSES, JOB_STATUSES, CrawlJob, CrawlParams, PageError, StartedJob
from services.access.job_limits import insert_job, scoped_ids
from services.access.scope import current_scope
from services.crawl.job_sql import COUNTERS_JOIN, JOB_COLUMNS
from services.crawl.params import SCOPES, build_params, check_start_url, default_source_title
from services.crawl.politeness import HostThrottle, SharedHostGate
from services.errors import Conflict, InvalidArgument, NotFound
from services.net.credentials import same_host
from services.net.safety import check_url_allowed
from services.validation import check_page, parse_uuid

if TYPE_CHECKING:
    from services.ports import AppServices as Archivist

logger = logging.getLogger(__name__)

__all__ = ["JOB_STATUSES", "MAX_ATTEMPTS", "SCOPES", "JobService"]  # SCOPES and JOB_STATUSES: for the console

JOB_HINT = "Use crawl_website(action='list') to find job ids."
RECENT_ERRORS = 10
CANCEL_WAIT_SECONDS = 2.5
# A job claimed this many times without finishing has crashed its workers repeatedly: give up on it.
MAX_ATTEMPTS = 5

ProgressFn = Callable[[CrawlJob], Awaitable[None]]


@dataclass(frozen=True)
class Heartbeat:
    """What a worker learns when it refreshes its job's heartbeat."""

    owned: bool  # False: the job is no longer ours (finished elsewhere, or resumed by another worker)
    cancel_requested: bool


def visible(row: asyncpg.Record) -> bool:
    """A job is seen through its source; one whose source was removed (a failed crawl's own, empty) by
    whoever started it."""
    scope = current_scope()
    return scope.allows(row["source_id"]) or (row["source_id"] is None and row["started_by"] == scope.who)


def _to_job(row: asyncpg.Record, errors: list[PageError] | None = None) -> CrawlJob:
    values: dict[str, Any] = dict(row)
    values["warnings"] = values.get("warnings") or []
    values["recent_errors"] = errors or []
    return CrawlJob(**values)


class JobService:
    """Crawl jobs for tools, the CLI and workers; see the module docstring."""

    def __init__(self, app: Archivist) -> None:
        self.app = app
        self.db = app.db
        self.settings = app.settings
        self._wakeup: asyncio.Event | None = None
        self._throttle: HostThrottle | None = None
        # In-process cancel signals, so a runner in this process stops at once (others poll the flag).
        self._cancel_events: dict[UUID, asyncio.Event] = {}

    # ---------- queueing ----------

    def build_params(self, url: str | None, *args: Any, **kwargs: Any) -> tuple[CrawlParams, list[str]]:
        """Validate crawl arguments (see `services.crawl.params.build_params`): parameters and notes."""
        return build_params(self.settings, url, *args, **kwargs)

    async def start(
        self,
        url: str | None,
        source_id: str | UUID | None = None,
        title: str | None = None,
        recursive: bool = False,
        max_depth: int = 2,
        max_pages: int = 20,
        include_patterns: list[str] | None = None,
        exclude_patterns: list[str] | None = None,
        scope: str = "same-host",
        headers: dict[str, str] | None = None,
        cookies: dict[str, str] | None = None,
        auth_hosts: list[str] | None = None,
    ) -> StartedJob:
        """Validate and queue a crawl; the source is found or created by title (default: the host).
        `headers` / `cookies` are `env:NAME` references (documentation behind a login)."""
        params, notes = self.build_params(
            url,
            recursive,
            max_depth,
            max_pages,
            include_patterns,
            exclude_patterns,
            scope,
            headers,
            cookies,
            auth_hosts,
        )
        await check_url_allowed(params.url, self.settings.crawl_allow_private)
        if source_id:
            sid, created = (await self.app.sources.get(source_id)).id, False
        else:
            source_title = (title or "").strip() or default_source_title(params.url)
            source, created = await self.app.sources.get_or_create(source_title, source_type="crawl", url=params.url)
            sid = source.id
        job = await self._insert(sid, "crawl", params, created)
        return StartedJob(job=job, source_created=created, notes=notes)

    async def recrawl(
        self,
        source_id: str | UUID | None = None,
        job_id: str | UUID | None = None,
        url: str | None = None,
        **overrides: Any,
    ) -> StartedJob:
        """Queue a new crawl of a source with the settings of its last crawl (or of the given job);
        `url` and `overrides` (recursive, max_depth, max_pages, include/exclude_patterns, scope, headers,
        cookies, auth_hosts) replace them; header and cookie references are reused. With only `url`, the
        source is the one last crawled from that URL."""
        if job_id:
            previous = await self.get(job_id)
            sid, raw_params = previous.source_id, previous.params.model_dump()
        elif source_id or url:
            if source_id:
                sid = (await self.app.sources.get(source_id)).id
                where, arg = "source_id = $1", sid
            else:
                where, arg = "params->>'url' = $1", check_start_url(url)
            row = await self.db.pool.fetchrow(
                f"SELECT source_id, params FROM crawl_jobs WHERE {where} AND kind <> 'sync' "
                "AND ($2::uuid[] IS NULL OR source_id = ANY($2::uuid[])) ORDER BY created_at DESC LIMIT 1",
                arg,
                scoped_ids(),
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
        await self._refuse_if_active(sid)
        original = CrawlParams(**raw_params)
        given = {k: v for k, v in overrides.items() if v is not None}
        merged = {**original.model_dump(), **given, "url": url or original.url}
        moved = not same_host(merged["url"], original.url) and (original.headers or original.cookies)
        if moved and "headers" not in given and "cookies" not in given:  # a login never follows to another host
            merged.update(headers={}, cookies={}, auth_hosts=[])
            login_note = ["The crawl moved to another host: its login headers and cookies were not carried over."]
        else:
            login_note = []
        params, notes = self.build_params(
            merged["url"],
            merged["recursive"],
            merged["max_depth"],
            merged["max_pages"],
            merged["include_patterns"],
            merged["exclude_patterns"],
            merged["scope"],
            merged["headers"],
            merged["cookies"],
            merged["auth_hosts"],
        )
        await check_url_allowed(params.url, self.settings.crawl_allow_private)
        job = await self._insert(sid, "recrawl", params)
        return StartedJob(job=job, notes=notes + login_note)

    async def _refuse_if_active(self, source_id: UUID) -> None:
        active = await self.db.pool.fetchrow(
            "SELECT id, status FROM crawl_jobs WHERE source_id = $1 AND status = ANY($2::text[]) "
            "ORDER BY created_at DESC LIMIT 1",
            source_id,
            list(ACTIVE_STATUSES),
        )
        if active is not None:
            raise Conflict(
                f"A crawl of this source is already {active['status']} (job {active['id']}).",
                f"Watch it with crawl_website(action='status', job_id='{active['id']}'), or cancel it first.",
            )

    async def _insert(self, source_id: UUID, kind: str, params: CrawlParams, created: bool = False) -> CrawlJob:
        job_id = await insert_job(self.db, self.settings, source_id, kind, params.model_dump())
        if created:  # the source exists for this job: a failure that stores nothing removes it again
            await self.db.pool.execute("UPDATE crawl_jobs SET created_source = true WHERE id = $1", job_id)
        logger.info("queued %s job %s for %s", kind, job_id, params.url)
        self.wakeup.set()
        return await self.get(job_id)

    # ---------- reading ----------

    async def get(self, job_id: str | UUID | None) -> CrawlJob:
        """A job with its counters and most recent page errors."""
        jid = parse_uuid(job_id, "job_id", JOB_HINT)
        async with self.db.pool.acquire() as conn:
            row = await conn.fetchrow(
                f"SELECT {JOB_COLUMNS}, j.started_by FROM crawl_jobs j {COUNTERS_JOIN} WHERE j.id = $1", jid
            )
            if row is None or not visible(row):  # out of scope reads as missing
                raise NotFound(f"Crawl job not found: {jid}", JOB_HINT)
            errors = await conn.fetch(
                "SELECT url, error, http_status FROM crawl_frontier WHERE job_id = $1 AND state = 'failed' "
                "ORDER BY fetched_at DESC NULLS LAST, seq DESC LIMIT $2",
                jid,
                RECENT_ERRORS,
            )
        return _to_job(
            row, [PageError(url=e["url"], error=e["error"] or "failed", http_status=e["http_status"]) for e in errors]
        )

    async def list(
        self, status: str | None = None, source_id: str | UUID | None = None, page: int = 1, per_page: int = 10
    ) -> Page[CrawlJob]:
        """Jobs, newest first, optionally only one status and/or one source."""
        page, per_page = check_page(page, per_page)
        if status is not None and status not in JOB_STATUSES:
            raise InvalidArgument(f"Invalid status filter '{status}'.", f"Use one of: {', '.join(JOB_STATUSES)}.")
        sid = (await self.app.sources.get(source_id)).id if source_id else None
        rows, total = await self.db.fetch_page(
            JOB_COLUMNS,
            "crawl_jobs j WHERE ($1::text IS NULL OR j.status = $1) AND ($2::uuid IS NULL OR j.source_id = $2) "
            "AND ($3::uuid[] IS NULL OR j.source_id = ANY($3::uuid[]) OR (j.source_id IS NULL AND j.started_by = $4))",
            "j.created_at DESC, j.id",
            [status, sid, scoped_ids(), current_scope().who],
            page,
            per_page,
            join=COUNTERS_JOIN,
        )
        return Page[CrawlJob](items=[_to_job(r) for r in rows], total_count=total, page=page, per_page=per_page)

    async def wait(
        self, job_id: str | UUID | None, timeout: float, on_progress: ProgressFn | None = None, interval: float = 0.5
    ) -> CrawlJob:
        """Poll a job until it finishes or `timeout` seconds pass; `on_progress` sees each snapshot."""
        deadline = time.monotonic() + max(0.0, timeout)
        job = await self.get(job_id)
        while not job.finished and time.monotonic() < deadline:
            if on_progress is not None:
                await on_progress(job)
            await asyncio.sleep(min(interval, max(0.0, deadline - time.monotonic())))
            job = await self.get(job.id)
        return job

    # ---------- cancelling ----------

    async def cancel(
        self, job_id: str | UUID | None, wait_seconds: float = CANCEL_WAIT_SECONDS
    ) -> tuple[CrawlJob, bool]:
        """Cancel a job: a queued (or orphaned) job at once, a running one by its worker within ~2 s.

        Returns the job and whether it was still active. Pages already ingested stay.
        """
        jid = (await self.get(job_id)).id  # NOT_FOUND outside the caller's scope
        async with self.db.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "UPDATE crawl_jobs SET cancel_requested = true, updated_at = now(), "
                "status = CASE WHEN status = 'queued' OR heartbeat_at < now() - make_interval(secs => $2) "
                "  THEN 'cancelled' ELSE status END, "
                "completed_at = CASE WHEN status = 'queued' OR heartbeat_at < now() - make_interval(secs => $2) "
                "  THEN now() ELSE completed_at END "
                "WHERE id = $1 AND status IN ('queued', 'running') RETURNING status",
                jid,
                float(self.settings.job_stale_seconds),
            )
            if row is not None and row["status"] == "cancelled":
                await conn.execute(
                    "UPDATE crawl_frontier SET state = 'pending' WHERE job_id = $1 AND state = 'fetching'", jid
                )
        if row is None:
            return await self.get(jid), False
        event = self._cancel_events.get(jid)
        if event is not None:
            event.set()
        logger.info("cancel requested for job %s", jid)
        job = await self.get(jid)
        deadline = time.monotonic() + wait_seconds
        while not job.finished and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            job = await self.get(jid)
        return job, True

    def cancel_event(self, job_id: UUID) -> asyncio.Event:
        """The in-process event set when this job is cancelled (the runner also polls the database)."""
        return self._cancel_events.setdefault(job_id, asyncio.Event())

    def forget_cancel_event(self, job_id: UUID) -> None:
        self._cancel_events.pop(job_id, None)

    # ---------- worker side ----------

    @property
    def throttle(self) -> HostThrottle:
        """One throttle per process, so per-host limits hold across jobs crawling the same host."""
        if self._throttle is None:
            shared = SharedHostGate(self.app.db.dsn, self.settings.crawl_concurrency) if self.app.db.dsn else None
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

    @property
    def wakeup(self) -> asyncio.Event:
        """Set when a job is queued in this process, so the in-process worker need not wait for its poll."""
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
        return self._wakeup

    async def claim(self, worker_id: str) -> CrawlJob | None:
        """Take the oldest queued job, or a running one whose worker stopped heart-beating."""
        job_id = await self.db.pool.fetchval(
            "UPDATE crawl_jobs SET status = 'running', worker_id = $1, heartbeat_at = now(), "
            "attempts = attempts + 1, started_at = coalesce(started_at, now()), updated_at = now() "
            "WHERE id = (SELECT id FROM crawl_jobs WHERE status = 'queued' "
            "  OR (status = 'running' AND heartbeat_at < now() - make_interval(secs => $2)) "
            "  ORDER BY created_at FOR UPDATE SKIP LOCKED LIMIT 1) "
            "RETURNING id",
            worker_id,
            float(self.settings.job_stale_seconds),
        )
        if job_id is None:
            return None
        job = await self.get(job_id)
        if job.attempts > 1:
            logger.warning("worker %s resumes job %s (attempt %d)", worker_id, job_id, job.attempts)
        return job

    async def heartbeat(self, job_id: UUID, worker_id: str) -> Heartbeat:
        row = await self.db.pool.fetchrow(
            "UPDATE crawl_jobs SET heartbeat_at = now() WHERE id = $1 AND worker_id = $2 AND status = 'running' "
            "RETURNING cancel_requested",
            job_id,
            worker_id,
        )
        return Heartbeat(owned=row is not None, cancel_requested=bool(row and row["cancel_requested"]))

    async def release(self, job_id: UUID, worker_id: str) -> None:
        """Hand a running job back to the queue (worker shutting down): another worker resumes it."""
        async with self.db.pool.acquire() as conn, conn.transaction():
            released = await conn.fetchval(
                "UPDATE crawl_jobs SET status = 'queued', worker_id = NULL, heartbeat_at = NULL, "
                "attempts = greatest(attempts - 1, 0), updated_at = now() "
                "WHERE id = $1 AND worker_id = $2 AND status = 'running' RETURNING id",
                job_id,
                worker_id,
            )
            if released is not None:
                await conn.execute(
                    "UPDATE crawl_frontier SET state = 'pending' WHERE job_id = $1 AND state = 'fetching'", job_id
                )
        logger.info("released job %s back to the queue", job_id)

    async def finish(
        self, job_id: UUID, worker_id: str, status: str, error: str | None = None, warnings: list[str] | None = None
    ) -> bool:
        """Record a job's final status; False if the job was no longer this worker's."""
        finished = await self.db.pool.fetchval(
            "UPDATE crawl_jobs SET status = $3, error = $4, warnings = $5, completed_at = now(), "
            "heartbeat_at = now(), updated_at = now() "
            "WHERE id = $1 AND worker_id = $2 AND status = 'running' RETURNING id",
            job_id,
            worker_id,
            status,
            error,
            warnings or [],
        )
        return finished is not None
