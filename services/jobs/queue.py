"""The job queue: queue, read, wait for and cancel jobs; claim, heartbeat, hand back and finish them.

A job is a row of the jobs table; what it works through (pages, files) are rows of its frontier
(services/jobs/frontier.py). The queue knows no job kind: services/crawl/service.py queues crawls,
services/sync/ folder and git syncs, and the worker (services/jobs/worker.py) runs each claimed job with
the runner its kind names. Every statement is in services/jobs/sql.py.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from models import Page
from models.jobs import ACTIVE_STATUSES, JOB_STATUSES, CrawlJob, JobRights, PageError
from services.access.job_limits import RETRY_AFTER_SECONDS, running_limit, scoped_ids
from services.access.scope import current_scope
from services.core.database import Database
from services.core.errors import InvalidArgument, NotFound, RateLimited
from services.core.settings import Settings
from services.core.validation import check_page, parse_uuid
from services.jobs import sql
from services.jobs.registry import live_workers, no_worker_warning
from services.jobs.rights import job_rights, process_name, worker_rights

logger = logging.getLogger(__name__)

JOB_HINT = "Use crawl_website(action='list') to find job ids."
RECENT_ERRORS = 10
CANCEL_WAIT_SECONDS = 2.5

ProgressFn = Callable[[CrawlJob], Awaitable[None]]


@dataclass(frozen=True)
class Heartbeat:
    """What a worker learns when it refreshes its job's heartbeat."""

    owned: bool  # False: the job is no longer ours (finished elsewhere, or resumed by another worker)
    cancel_requested: bool


@dataclass(frozen=True)
class ClaimedJob:
    """A job a worker took, and on whose behalf it runs (who queued it, and whether as the local owner)."""

    job: CrawlJob
    started_by: str | None
    local_owner: bool


def visible(row: asyncpg.Record) -> bool:
    """A job is seen through its source; one whose source was removed (a failed crawl's own, empty) by
    whoever started it."""
    scope = current_scope()
    return scope.allows(row["source_id"]) or (row["source_id"] is None and row["started_by"] == scope.who)


def to_job(row: asyncpg.Record, errors: list[PageError] | None = None) -> CrawlJob:
    values: dict[str, Any] = dict(row)
    values["warnings"] = values.get("warnings") or []
    values["recent_errors"] = errors or []
    return CrawlJob(**values)


class JobQueue:
    """Every job of every kind, for tools, the CLI, the console and workers; see the module docstring."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        self._wakeup: asyncio.Event | None = None
        # In-process cancel signals, so a runner in this process stops at once (others poll the flag).
        self._cancel_events: dict[UUID, asyncio.Event] = {}

    # ---------- queueing ----------

    async def insert(
        self,
        source_id: UUID,
        kind: str,
        params: dict[str, Any],
        *,
        created_source: bool = False,
        secret_names: Sequence[str] = (),
    ) -> CrawlJob:
        """Queue one job for the current caller, within its running-jobs limit (RATE_LIMITED past it).
        `created_source`: the source exists for this job (a crawl that stores nothing removes it again).
        `secret_names`: variables it reads beyond its params' `env:` references (a git token)."""
        scope = current_scope()
        limit = running_limit(scope, self.settings)
        async with self.db.pool.acquire() as conn, conn.transaction():
            if limit is not None:
                await conn.execute(sql.LOCK_CALLER, scope.who)
                active = await conn.fetchval(sql.COUNT_ACTIVE_OF_CALLER, scope.who, list(ACTIVE_STATUSES))
                if active >= limit:
                    raise RateLimited(
                        f"{active} crawl/sync jobs of '{scope.who}' are already queued or running "
                        f"(the limit is {limit}).",
                        "Wait for one to finish (crawl_website(action='list', status='running')), or cancel one; "
                        f"retry in {RETRY_AFTER_SECONDS:g} seconds.",
                        retry_after_seconds=RETRY_AFTER_SECONDS,
                    )
            rights = job_rights(params, scope, self.settings, secret_names).model_dump()
            job_id: UUID = await conn.fetchval(
                sql.INSERT, source_id, kind, params, scope.who, scope.local_owner, created_source, rights
            )
        logger.info("queued %s job %s for %s", kind, job_id, params.get("url"))
        self.wakeup.set()
        return await self.get(job_id)

    async def queued(self, source_id: UUID, kind: str) -> CrawlJob | None:
        """A job of this kind already waiting for this source (not being cancelled), if any."""
        job_id = await self.db.pool.fetchval(sql.QUEUED_OF_SOURCE, source_id, kind)
        return None if job_id is None else await self.get(job_id)

    async def active(self, source_id: UUID) -> asyncpg.Record | None:
        """(id, status) of the newest queued or running job of a source, if any."""
        row: asyncpg.Record | None = await self.db.pool.fetchrow(sql.ACTIVE_OF_SOURCE, source_id, list(ACTIVE_STATUSES))
        return row

    async def latest(
        self, kinds: Sequence[str], source_id: UUID | None = None, url: str | None = None
    ) -> asyncpg.Record | None:
        """(source_id, params) of the newest job of `kinds` of a source, or started at a URL, that the
        caller may see."""
        row: asyncpg.Record | None = await self.db.pool.fetchrow(
            sql.LATEST_OF_KINDS, list(kinds), source_id, url, scoped_ids()
        )
        return row

    # ---------- reading ----------

    async def get(self, job_id: str | UUID | None) -> CrawlJob:
        """A job with its counters and most recent page errors."""
        jid = parse_uuid(job_id, "job_id", JOB_HINT)
        async with self.db.pool.acquire() as conn:
            row = await conn.fetchrow(sql.SELECT_ONE, jid)
            if row is None or not visible(row):  # out of scope reads as missing
                raise NotFound(f"Crawl job not found: {jid}", JOB_HINT)
            errors = await conn.fetch(sql.RECENT_ERRORS, jid, RECENT_ERRORS)
        return to_job(
            row, [PageError(url=e["url"], error=e["error"] or "failed", http_status=e["http_status"]) for e in errors]
        )

    async def list(
        self, status: str | None = None, source_id: UUID | None = None, page: int = 1, per_page: int = 10
    ) -> Page[CrawlJob]:
        """Jobs, newest first, optionally only one status and/or one source (an id the caller checked)."""
        page, per_page = check_page(page, per_page)
        if status is not None and status not in JOB_STATUSES:
            raise InvalidArgument(f"Invalid status filter '{status}'.", f"Use one of: {', '.join(JOB_STATUSES)}.")
        rows, total = await self.db.fetch_page(
            sql.JOB_COLUMNS,
            sql.LIST_FROM,
            sql.LIST_ORDER,
            [status, source_id, scoped_ids(), current_scope().who],
            page,
            per_page,
            join=sql.COUNTERS_JOIN,
        )
        return Page[CrawlJob](items=[to_job(r) for r in rows], total_count=total, page=page, per_page=per_page)

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
            row = await conn.fetchrow(sql.CANCEL, jid, float(self.settings.job_stale_seconds))
            if row is not None and row["status"] == "cancelled":
                await conn.execute(sql.RECOVER_FETCHING, jid)
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
    def wakeup(self) -> asyncio.Event:
        """Set when a job is queued in this process, so the in-process worker need not wait for its poll."""
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
        return self._wakeup

    async def claim(self, worker_id: str) -> ClaimedJob | None:
        """Take the oldest queued job, or a running one whose worker stopped heart-beating."""
        private, roots, secrets = worker_rights(self.settings)
        stale = float(self.settings.job_stale_seconds)
        row = await self.db.pool.fetchrow(sql.CLAIM, worker_id, stale, private, roots, secrets)
        if row is None:
            await self.fail_unhonoured()
            return None
        job = await self.get(row["id"])
        if job.attempts > 1:
            logger.warning("worker %s resumes job %s (attempt %d)", worker_id, job.id, job.attempts)
        return ClaimedJob(job, row["started_by"], bool(row["local_owner"]))

    async def waiting_reason(self, job: CrawlJob) -> str | None:
        """Why a queued job would wait: no running worker (services/jobs/registry.py) can take it; None if one can."""
        return no_worker_warning(job, await live_workers(self.db.pool, self.settings))

    async def fail_unhonoured(self) -> None:
        """Fail the queued jobs this worker cannot honour that no other worker took in
        `job_unhonoured_seconds`, naming both processes' settings."""
        private, roots, secrets = worker_rights(self.settings)
        wait = float(self.settings.job_unhonoured_seconds)
        for row in await self.db.pool.fetch(sql.UNHONOURED, private, roots, secrets, wait):
            rights = JobRights.model_validate(row["rights"])
            held = [name for name in rights.secret_names if name in secrets]
            missing = [name for name in rights.secret_names if name not in secrets]
            mine = JobRights(allowed_paths=roots, allow_private=private, secret_names=held)
            lacks = f" (not {', '.join(missing)})" if missing else ""
            error = (
                f"No worker could run this job in {self.settings.job_unhonoured_seconds:g} s: it was queued by "
                f"{rights.queued_by or 'another process'} with {rights.describe()}; this worker "
                f"({process_name()}) has {mine.describe(secrets=bool(rights.secret_names))}{lacks}. "
                "Run `archivist worker` with the queueing process's settings, or start the job where they hold."
            )
            if await self.db.pool.fetchval(sql.FAIL_QUEUED, row["id"], error) is not None:
                logger.warning("job %s failed: %s", row["id"], error)

    async def heartbeat(self, job_id: UUID, worker_id: str) -> Heartbeat:
        row = await self.db.pool.fetchrow(sql.HEARTBEAT, job_id, worker_id)
        return Heartbeat(owned=row is not None, cancel_requested=bool(row and row["cancel_requested"]))

    async def cancel_requested(self, job_id: UUID) -> bool:
        return bool(await self.db.pool.fetchval(sql.CANCEL_REQUESTED, job_id))

    async def seeded(self, job_id: UUID) -> bool:
        """Whether the job's frontier was seeded (by this worker or one before it)."""
        return bool(await self.db.pool.fetchval(sql.SEEDED, job_id))

    async def mark_seeded(self, job_id: UUID, conn: asyncpg.Connection | None = None) -> None:
        """Record that the frontier is seeded (on `conn`: in the transaction that seeded it)."""
        await (conn or self.db.pool).execute(sql.MARK_SEEDED, job_id)

    async def release(self, job_id: UUID, worker_id: str) -> None:
        """Hand a running job back to the queue (worker shutting down): another worker resumes it."""
        async with self.db.pool.acquire() as conn, conn.transaction():
            released = await conn.fetchval(sql.RELEASE, job_id, worker_id)
            if released is not None:
                await conn.execute(sql.RECOVER_FETCHING, job_id)
        logger.info("released job %s back to the queue", job_id)

    async def finish(
        self,
        job_id: UUID,
        worker_id: str,
        status: str,
        error: str | None = None,
        warnings: builtins.list[str] | None = None,
        *,
        recover: bool = False,
    ) -> bool:
        """Record a job's final status; False if the job was no longer this worker's. `recover`: items
        left mid-fetch go back to pending (a cancelled job), in the same transaction."""
        async with self.db.pool.acquire() as conn, conn.transaction():
            if recover:
                await conn.execute(sql.RECOVER_FETCHING, job_id)
            finished = await conn.fetchval(sql.FINISH, job_id, worker_id, status, error, warnings or [])
        return finished is not None
