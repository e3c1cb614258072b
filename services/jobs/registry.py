"""The workers running now: each registers when it starts, beats while it runs and leaves when it stops
(the `job_workers` table, sql/041), with what it can honour (services/jobs/rights.py).

So `archivist crawl --detach` can warn that no running worker can take its job (it would stay queued),
and `archivist doctor` can tell the workers running from its own process, which runs none."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from models.jobs import Job, JobRights
from services.core.settings import Settings
from services.jobs import sql
from services.jobs.rights import honours, worker_rights

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LiveWorker:
    """A worker that beat recently, and what it can honour."""

    id: str
    started_at: datetime
    heartbeat_at: datetime
    allow_private: bool
    allowed_paths: list[str]

    def can_run(self, job: Job) -> bool:
        return honours(job.rights, self.allow_private, self.allowed_paths)


class WorkerRegistry:
    """One worker's entry in the registry (register, beat at most every heartbeat, leave)."""

    def __init__(self, pool: asyncpg.Pool, settings: Settings, worker_id: str) -> None:
        self.pool = pool
        self.settings = settings
        self.worker_id = worker_id
        self._last_beat = 0.0

    async def register(self) -> None:
        private, roots, _secrets = worker_rights(self.settings)  # secrets: names only this process checks
        await self.pool.execute(sql.REGISTER_WORKER, self.worker_id, private, roots)
        await self.pool.execute(sql.FORGET_DEAD_WORKERS)
        self._last_beat = time.monotonic()

    async def beat(self) -> None:
        """Refresh this worker's heartbeat (registering again if its row was forgotten)."""
        if time.monotonic() - self._last_beat < self.settings.job_heartbeat_seconds:
            return
        if await self.pool.fetchval(sql.BEAT_WORKER, self.worker_id) is None:
            await self.register()
        self._last_beat = time.monotonic()

    async def leave(self) -> None:
        await self.pool.execute(sql.LEAVE_WORKER, self.worker_id)


async def live_workers(pool: asyncpg.Pool, settings: Settings) -> list[LiveWorker]:
    """The workers that beat within `job_stale_seconds`."""
    rows = await pool.fetch(sql.LIVE_WORKERS, float(settings.job_stale_seconds))
    return [
        LiveWorker(r["id"], r["started_at"], r["heartbeat_at"], r["allow_private"], list(r["allowed_paths"] or []))
        for r in rows
    ]


def no_worker_warning(job: Job, workers: list[LiveWorker]) -> str | None:
    """Why the job would wait in the queue, or None if a running worker can take it."""
    if any(w.can_run(job) for w in workers):
        return None
    if not workers:
        return (
            f"No worker is running: job {job.id} stays queued until one starts "
            "(`archivist worker`, or `archivist serve` without --no-worker, on this database)."
        )
    rights = job.rights or JobRights()
    return (
        f"None of the {len(workers)} running workers can take job {job.id}: it needs {rights.describe()} "
        "and theirs differ. Start `archivist worker` with this process's settings."
    )
