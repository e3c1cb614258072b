"""One claimed job's lifecycle, written once for every kind: watch, work, conclude, hand back.

While a job runs, a watcher refreshes its heartbeat and turns a cancel (this process's event or the
database flag), a stop (the worker shutting down) or lost ownership (another worker resumed it) into an
interrupt, checked every WATCH_SECONDS. When the work ends the job concludes: lost -> nothing (it is
someone else's), stop -> handed back to the queue, cancel -> cancelled (items left mid-fetch go back to
pending), else the kind's `complete()`. An error fails the job with a short message, except a database
outage, which hands it back (it resumes from its frontier).

A job kind is one subclass of JobRun (services/crawl/runner.py, services/sync/runner.py,
services/sync/git/runner.py) and one row of the worker's runner table (built in services/app.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

import asyncpg

from models.jobs import CrawlJob
from services.core.errors import ServiceError, unavailable_from
from services.jobs.queue import JobQueue

logger = logging.getLogger(__name__)

WATCH_SECONDS = 0.5  # how often the cancel flag is read (cancel must take effect within 2 s)
ERROR_LENGTH = 300
HAND_BACK_TRIES = 60

Interrupt = Literal["cancel", "stop", "lost"]


@dataclass(frozen=True)
class Claim:
    """A job a worker claimed: the job, the worker's id, and the event that tells the worker to stop."""

    job: CrawlJob
    worker_id: str
    stop: asyncio.Event


class JobFailed(Exception):
    """A job that cannot run (its folder is gone, its repository cannot be fetched): the text is its error."""


def short_error(text: str | None) -> str:
    """One line, at most ERROR_LENGTH characters: what agents see, never a stack trace."""
    line = " ".join((text or "failed").split())
    return line if len(line) <= ERROR_LENGTH else line[: ERROR_LENGTH - 1] + "…"


async def wait_any(events: Iterable[asyncio.Event], timeout: float) -> None:
    """Return when any event is set or `timeout` seconds have passed."""
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)


class JobRun(ABC):
    """Runs one claimed job to completion, cancellation, hand-back (stop) or loss of ownership."""

    def __init__(self, claim: Claim, queue: JobQueue, heartbeat_seconds: float) -> None:
        self.job = claim.job
        self.worker_id = claim.worker_id
        self.stop = claim.stop
        self.queue = queue
        self.heartbeat_seconds = heartbeat_seconds
        self.cancel_event = queue.cancel_event(claim.job.id)
        self.interrupt = asyncio.Event()
        self.interrupt_reason: Interrupt | None = None
        self.warnings: list[str] = []

    @property
    def source_id(self) -> UUID:
        """The source the job writes into: every crawl and sync job has one while it runs (a failed crawl's
        own empty source is removed only once the job has ended)."""
        if self.job.source_id is None:
            raise ServiceError(f"Job {self.job.id} has no source.", "Start the crawl or sync again.")
        return self.job.source_id

    # ---------- what a kind writes ----------

    @abstractmethod
    async def work(self) -> None:
        """The kind's work; it stops soon after `self.interrupt` is set (or runs under `unless_interrupted`)."""

    @abstractmethod
    async def complete(self) -> None:
        """Record the end of a job whose work ran to its end (completed or failed, with warnings)."""

    async def close(self) -> None:  # noqa: B027 - a hook: most kinds hold nothing to release
        """Release what the work held (a fetcher, memory); runs whatever the end."""

    # ---------- the lifecycle ----------

    async def run(self) -> None:
        watcher = asyncio.create_task(self._watch(), name=f"job-watch-{self.job.id}")
        try:
            await self.work()
            await self._conclude()
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            self.queue.forget_cancel_event(self.job.id)
            await self.close()

    async def unless_interrupted(self, work: Coroutine[Any, Any, None]) -> bool:
        """Run `work` unless a cancel / stop / loss of ownership comes first (then cancel it: False)."""
        task = asyncio.create_task(work)
        interrupted = asyncio.create_task(self.interrupt.wait())
        try:
            await asyncio.wait([task, interrupted], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pending in (task, interrupted):
                if not pending.done():
                    pending.cancel()
            await asyncio.gather(task, interrupted, return_exceptions=True)
        if task.cancelled():
            return False
        task.result()  # re-raise what the work raised
        return True

    async def _conclude(self) -> None:
        reason = self.interrupt_reason
        if reason == "lost":
            logger.warning("job %s was taken over by another worker; %s stops", self.job.id, self.worker_id)
        elif reason == "stop":
            await self.queue.release(self.job.id, self.worker_id)
        elif reason == "cancel":
            await self.queue.finish(self.job.id, self.worker_id, "cancelled", None, self.warnings, recover=True)
            logger.info("job %s cancelled", self.job.id)
        else:
            await self.complete()

    # ---------- cancel, stop, heartbeat ----------

    def _interrupt(self, reason: Interrupt) -> None:
        if not self.interrupt.is_set():
            self.interrupt_reason = reason
            self.interrupt.set()

    async def _watch(self) -> None:
        """Heartbeat, and turn cancel / stop / lost ownership into an interrupt (checked every 0.5 s)."""
        last_beat = time.monotonic()
        while not self.interrupt.is_set():
            await wait_any((self.cancel_event, self.stop), WATCH_SECONDS)
            if self.stop.is_set():
                self._interrupt("stop")
            elif self.cancel_event.is_set():
                self._interrupt("cancel")
            else:
                try:
                    last_beat = await self._beat_or_poll(last_beat)
                except (asyncpg.PostgresError, OSError) as exc:
                    logger.warning("job %s: heartbeat failed: %s", self.job.id, exc)

    async def _beat_or_poll(self, last_beat: float) -> float:
        if time.monotonic() - last_beat >= self.heartbeat_seconds:
            beat = await self.queue.heartbeat(self.job.id, self.worker_id)
            if not beat.owned:
                self._interrupt("lost")
            elif beat.cancel_requested:
                self._interrupt("cancel")
            return time.monotonic()
        if await self.queue.cancel_requested(self.job.id):  # cancelled by another process
            self._interrupt("cancel")
        return last_beat


RunnerFactory = Callable[[Claim], JobRun]


async def run_job(make: RunnerFactory, claim: Claim, queue: JobQueue) -> None:
    """Build and run a claimed job's runner; an error fails the job with a short message (logged in full,
    unless it is a ServiceError or JobFailed, whose text says what to fix); a database outage hands it back."""
    try:
        await make(claim).run()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if unavailable_from(exc) is not None:  # the database blinked: hand the job back, never fail it
            await hand_back_when_possible(queue, claim, exc)
            return
        if isinstance(exc, ServiceError | JobFailed):  # e.g. a login variable unset since the job was queued
            message = exc.message if isinstance(exc, ServiceError) else str(exc)
            logger.warning("job %s: %s", claim.job.id, message)
        else:
            logger.exception("job %s failed", claim.job.id)
            message = f"internal error: {type(exc).__name__}: {exc}"
        try:
            await queue.finish(claim.job.id, claim.worker_id, "failed", short_error(message))
        except Exception:
            logger.exception("job %s: could not record the failure", claim.job.id)


async def hand_back_when_possible(queue: JobQueue, claim: Claim, exc: BaseException) -> None:
    """Requeue a job interrupted by a database outage (retrying for up to a minute); it resumes from its
    frontier on the next claim. If the database stays away, the stale heartbeat requeues it anyway."""
    logger.warning("job %s paused: the database is unavailable (%s)", claim.job.id, type(exc).__name__)
    for _ in range(HAND_BACK_TRIES):
        try:
            await queue.release(claim.job.id, claim.worker_id)
            return
        except Exception as again:
            if unavailable_from(again) is None:
                raise
            await asyncio.sleep(1)
