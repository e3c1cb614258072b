"""Crawl job worker: claims jobs from Postgres and runs them until told to stop.

Any number of workers (the server's in-process one, `archivist worker` processes on other machines)
can share one DATABASE_URL: jobs are claimed with FOR UPDATE SKIP LOCKED, and a job whose worker stops
heart-beating for `job_stale_seconds` is claimed again and resumes from its frontier. On stop, a worker
hands its running jobs back to the queue so another worker picks them up at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from typing import TYPE_CHECKING

import asyncpg

from models.jobs import CrawlJob
from services.access.job_limits import job_scope
from services.access.scope import server_scope, use_scope
from services.crawl.runner import run_job, wait_any
from services.errors import ServiceError
from services.flags.store import run_scanner
from services.jobs import MAX_ATTEMPTS

if TYPE_CHECKING:
    from services.ports import AppServices as Archivist

logger = logging.getLogger(__name__)

DEFAULT_CONCURRENT_JOBS = 2
STOP_GRACE_SECONDS = 8.0


def default_worker_id() -> str:
    """host:pid:random, unique across machines and restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


async def run_worker(
    app: Archivist,
    stop: asyncio.Event,
    worker_id: str | None = None,
    *,
    concurrent_jobs: int = DEFAULT_CONCURRENT_JOBS,
) -> None:
    """Claim and run crawl jobs (up to `concurrent_jobs` at once) until `stop` is set.

    Polls every `settings.job_poll_seconds`, or sooner when a job is queued in this process. On stop,
    running jobs are handed back to the queue (within a few seconds).
    """
    worker_id = worker_id or default_worker_id()
    logger.info("crawl worker %s started", worker_id)
    running: set[asyncio.Task[None]] = set()
    backlog = start_backlog_runner(app, stop)
    scanner = asyncio.create_task(run_scanner(app.db, stop), name="flag-scan")  # chunks from before flags
    try:
        with use_scope(server_scope("worker")):  # claiming sees every job; each job runs in its own scope
            await work_until_stopped(app, worker_id, stop, running, concurrent_jobs)
    finally:
        await finish_running(running)
        await stop_backlog_runner(backlog, stop)
        await stop_backlog_runner(scanner, stop)
        logger.info("crawl worker %s stopped", worker_id)


def start_backlog_runner(app: Archivist, stop: asyncio.Event) -> asyncio.Task[None] | None:
    """Every worker (the server's and `archivist worker`) embeds pending chunks (services/documents/backlog.py)."""
    lanes = app.settings.embedding_backlog_lanes
    if lanes <= 0:
        return None
    return asyncio.create_task(app.documents.backlog.run(stop, lanes), name="embedding-backlog")


async def stop_backlog_runner(task: asyncio.Task[None] | None, stop: asyncio.Event) -> None:
    """The runner ends its batch in flight once `stop` is set (its chunks stay pending if cancelled)."""
    if task is None:
        return
    if not stop.is_set():
        task.cancel()
    try:
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), STOP_GRACE_SECONDS)
    except TimeoutError:
        logger.warning("%s did not stop in time", task.get_name())


async def work_until_stopped(
    app: Archivist, worker_id: str, stop: asyncio.Event, running: set[asyncio.Task[None]], concurrent_jobs: int
) -> None:
    while not stop.is_set():
        app.jobs.wakeup.clear()
        await claim_jobs(app, worker_id, stop, running, concurrent_jobs)
        await wait_any((stop, app.jobs.wakeup), app.settings.job_poll_seconds)
        for task in [t for t in running if t.done()]:
            running.discard(task)


async def claim_jobs(
    app: Archivist, worker_id: str, stop: asyncio.Event, running: set[asyncio.Task[None]], limit: int
) -> None:
    """Claim jobs while there are free slots; a database hiccup is logged and retried at the next poll."""
    while len([t for t in running if not t.done()]) < limit and not stop.is_set():
        try:
            job = await app.jobs.claim(worker_id)
            scope = None if job is None else await job_scope(app.db, job.id, job.source_id)
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ServiceError) as exc:
            logger.warning("worker %s could not claim a job: %s", worker_id, exc)
            return
        if job is None or scope is None:
            return
        with use_scope(scope):  # the job's task copies this scope
            task = asyncio.create_task(run_claimed(app, job, worker_id, stop), name=f"crawl-job-{job.id}")
        running.add(task)


async def run_claimed(app: Archivist, job: CrawlJob, worker_id: str, stop: asyncio.Event) -> None:
    """Run a claimed job, unless it has already killed too many workers."""
    if job.attempts > MAX_ATTEMPTS:
        error = f"Gave up after {job.attempts - 1} attempts: the workers running this job kept stopping."
        logger.error("job %s: %s", job.id, error)
        await app.jobs.finish(job.id, worker_id, "failed", error)
        return
    logger.info("worker %s runs job %s (%s %s)", worker_id, job.id, job.kind, job.params.url)
    if job.kind == "sync":
        from services.sync.jobs import run_sync_job

        await run_sync_job(app, job, worker_id, stop)
        return
    await run_job(app, job, worker_id, stop)


async def finish_running(running: set[asyncio.Task[None]]) -> None:
    """Give running jobs time to hand themselves back; cancel whatever is still going after that."""
    pending = {task for task in running if not task.done()}
    if not pending:
        return
    done, still = await asyncio.wait(pending, timeout=STOP_GRACE_SECONDS)
    for task in still:
        task.cancel()
    await asyncio.gather(*done, *still, return_exceptions=True)
