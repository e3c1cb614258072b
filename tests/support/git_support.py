"""Shared by the git source tests: run a sync, read what it stored (fixtures: tests/support/git_fixtures.py)."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

from models.jobs import CrawlJob
from services.app import Archivist, run_worker

TOKEN = "glpat-Sup3rSecretT0ken-x91"


async def run_sync(app: Archivist, source_id: Any, status: str | None = "completed", timeout: float = 60) -> CrawlJob:
    """Queue a sync of `source_id`, run a worker until it ends (at most `timeout` seconds); its status
    checked unless `status` is None."""
    started = await app.git.queue(source_id)
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(app, stop, "git-test"))
    try:
        job = await app.jobs.wait(started.job.id, timeout, interval=0.1)
    finally:
        stop.set()
        await task
    assert status is None or job.status == status, job
    return job


def counts(job: CrawlJob) -> tuple[int, int, int, int]:
    return job.documents_created, job.documents_updated, job.documents_unchanged, job.documents_deleted


async def stored(app: Archivist, source_id: UUID) -> dict[str, dict[str, Any]]:
    """path -> the document holding it (id, url, updated_at, metadata)."""
    rows = await app.db.pool.fetch(
        "SELECT g.path, d.id, d.url, d.updated_at, d.metadata FROM git_files g JOIN documents d "
        "ON d.id = g.document_id WHERE g.source_id = $1",
        source_id,
    )
    return {r["path"]: dict(r) for r in rows}
