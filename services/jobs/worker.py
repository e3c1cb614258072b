"""Job worker: claims jobs from Postgres and runs each with the runner of its kind until told to stop.

Any number of workers (the server's in-process one, `archivist worker` processes on other machines)
can share one DATABASE_URL: jobs are claimed with FOR UPDATE SKIP LOCKED, and a job whose worker stops
heart-beating for `job_stale_seconds` is claimed again and resumes from its frontier. On stop, a worker
hands its running jobs back to the queue so another worker picks them up at once.

The worker knows no job kind: it is given a table of runners (kind -> RunnerFactory, services/jobs/run.py)
and background chores (the embedding backlog, the flag scanner), both built in services/app.py.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import asyncpg

from services.access.job_limits import job_scope
from services.access.scope import server_scope, use_scope
from services.core.errors import ServiceError
from services.jobs.queue import JobQueue
from services.jobs.registry import WorkerRegistry
from services.jobs.run import Claim, RunnerFactory, run_job, wait_any

logger = logging.getLogger(__name__)

DEFAULT_CONCURRENT_JOBS = 2
STOP_GRACE_SECONDS = 8.0


def default_worker_id() -> str:
    """host:pid:random, unique across machines and restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


#: a job claimed this many times without finishing has crashed its workers repeatedly: give up on it
MAX_ATTEMPTS = 5

Chore = Callable[[asyncio.Event], Coroutine[Any, Any, None]]


class Worker:
    """One worker: its queue, the runner of each job kind, how often it polls and how many jobs it runs."""

    def __init__(
        self,
        queue: JobQueue,
        runners: Mapping[str, RunnerFactory],
        worker_id: str | None = None,
        *,
        poll_seconds: float,
        concurrent_jobs: int = DEFAULT_CONCURRENT_JOBS,
    ) -> None:
        self.queue = queue
        self.runners = runners
        self.worker_id = worker_id or default_worker_id()
        self.poll_seconds = poll_seconds
        self.concurrent_jobs = concurrent_jobs
        self.running: set[asyncio.Task[None]] = set()
        self.registry = WorkerRegistry(queue.db.pool, queue.settings, self.worker_id)

    async def run(self, stop: asyncio.Event, chores: Mapping[str, Chore] | None = None) -> None:
        """Claim and run jobs (up to `concurrent_jobs` at once) until `stop` is set, with the `chores`
        (name -> coroutine function given `stop`) running beside them.

        Polls every `poll_seconds`, or sooner when a job is queued in this process. On stop, running
        jobs are handed back to the queue (within a few seconds).
        """
        logger.info("crawl worker %s started", self.worker_id)
        helpers = [asyncio.create_task(chore(stop), name=name) for name, chore in (chores or {}).items()]
        await self._registry_step(self.registry.register)
        try:
            with use_scope(server_scope("worker")):  # claiming sees every job; each job runs in its own scope
                await self._work_until_stopped(stop)
        finally:
            await finish_running(self.running)
            for helper in helpers:
                await stop_chore(helper, stop)
            await self._registry_step(self.registry.leave)
            logger.info("crawl worker %s stopped", self.worker_id)

    async def _work_until_stopped(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.queue.wakeup.clear()
            await self._registry_step(self.registry.beat)
            await self._claim_jobs(stop)
            await wait_any((stop, self.queue.wakeup), self.poll_seconds)
            for task in [t for t in self.running if t.done()]:
                self.running.discard(task)

    async def _registry_step(self, step: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Register, beat or leave (services/jobs/registry.py): a database hiccup is only logged."""
        try:
            await step()
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ServiceError) as exc:
            logger.warning("worker %s could not update the worker registry: %s", self.worker_id, exc)

    async def _claim_jobs(self, stop: asyncio.Event) -> None:
        """Claim jobs while there are free slots; a database hiccup is logged and retried at the next poll."""
        while len([t for t in self.running if not t.done()]) < self.concurrent_jobs and not stop.is_set():
            try:
                claimed = await self.queue.claim(self.worker_id)
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ServiceError) as exc:
                logger.warning("worker %s could not claim a job: %s", self.worker_id, exc)
                return
            if claimed is None:
                return
            job, source_id = claimed.job, claimed.job.source_id
            if source_id is None:  # its source was removed while it waited: nothing to run
                await self.queue.finish(job.id, self.worker_id, "failed", "Its source was removed.")
                continue
            try:
                scope = await job_scope(self.queue.db, source_id, claimed.started_by, claimed.local_owner, job.rights)
            except ServiceError as exc:  # its caller's profiles no longer reach its source: it writes nothing
                logger.warning("job %s: %s", job.id, exc.message)
                await self.queue.finish(job.id, self.worker_id, "failed", exc.message)
                continue
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:  # resumed once it is stale
                logger.warning("worker %s could not check job %s: %s", self.worker_id, job.id, exc)
                return
            with use_scope(scope):  # the job's task copies this scope
                task = asyncio.create_task(self._run_claimed(Claim(job, self.worker_id, stop)), name=f"job-{job.id}")
            self.running.add(task)

    async def _run_claimed(self, claim: Claim) -> None:
        """Run a claimed job with the runner of its kind, unless it has already killed too many workers."""
        job = claim.job
        make = self.runners.get(job.kind)
        if job.attempts > MAX_ATTEMPTS or make is None:
            if make is None:
                error = f"This worker runs no job of kind '{job.kind}'."
            else:
                error = f"Gave up after {job.attempts - 1} attempts: the workers running this job kept stopping."
            logger.error("job %s: %s", job.id, error)
            await self.queue.finish(job.id, self.worker_id, "failed", error)
            return
        logger.info("worker %s runs job %s (%s %s)", self.worker_id, job.id, job.kind, job.shown_params.url)
        await run_job(make, claim, self.queue)


async def stop_chore(task: asyncio.Task[None], stop: asyncio.Event) -> None:
    """A chore ends its batch in flight once `stop` is set (e.g. its chunks stay pending if cancelled)."""
    if not stop.is_set():
        task.cancel()
    try:
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), STOP_GRACE_SECONDS)
    except TimeoutError:
        logger.warning("%s did not stop in time", task.get_name())


async def finish_running(running: set[asyncio.Task[None]]) -> None:
    """Give running jobs time to hand themselves back; cancel whatever is still going after that."""
    pending = {task for task in running if not task.done()}
    if not pending:
        return
    done, still = await asyncio.wait(pending, timeout=STOP_GRACE_SECONDS)
    for task in still:
        task.cancel()
    await asyncio.gather(*done, *still, return_exceptions=True)
