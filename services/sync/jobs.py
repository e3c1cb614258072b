"""Run a claimed sync job with the runner of its source's kind (folder or git)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from models.jobs import CrawlJob
from services.crawl.frontier import short_error
from services.errors import ServiceError
from services.sync.git.runner import GitSyncRunner
from services.sync.runner import SyncFailed, SyncRunner

if TYPE_CHECKING:
    from services.ports import AppServices as Archivist

logger = logging.getLogger(__name__)


async def runner_for(app: Archivist, job: CrawlJob) -> type[SyncRunner]:
    """The runner of the job's source: git sources have their own, folder sources this one."""
    kind = await app.db.pool.fetchval("SELECT source_type FROM sources WHERE id = $1", job.source_id)
    if kind == "git":
        return GitSyncRunner
    return SyncRunner


async def run_sync_job(app: Archivist, job: CrawlJob, worker_id: str, stop: asyncio.Event) -> None:
    """Run a claimed sync job; a failure is recorded on the job with a short message."""
    try:
        await (await runner_for(app, job))(app, job, worker_id, stop).run()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if isinstance(exc, ServiceError):
            message = exc.message
        elif isinstance(exc, SyncFailed):
            message = str(exc)
        else:
            logger.exception("sync %s failed", job.id)
            message = f"internal error: {type(exc).__name__}: {exc}"
        try:
            await app.jobs.finish(job.id, worker_id, "failed", short_error(message))
        except Exception:
            logger.exception("sync %s: could not record the failure", job.id)
