"""What other services ask of the jobs table about a source, run here so only services/jobs/ runs SQL on it.

A source's last run (the console), its latest crawl (manage_source get), the moment a job started (the
changes since it), the queue's counts (the health report), its jobs deleted with it, whether it ever
had a job (a source created for a failed write is removed only when it has none), and a failed crawl's
own empty source removed.

Writes that fail create nothing (issue 28): `crawl_website start` creates a source named after the
site before any page is fetched, so a crawl whose start page is missing or unreachable would leave an
empty source behind. The job itself stays (sql/029: its source_id becomes NULL) so its status and
page errors can still be read, by whoever started it. A job that fails before fetching (a login
variable unset since it was queued, a refused address) keeps its source, to be re-crawled once fixed.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeAlias
from uuid import UUID

import asyncpg

from services.jobs import sql

#: a pool, or a connection inside the caller's transaction
Runner: TypeAlias = asyncpg.Pool | asyncpg.Connection


async def last_run(db: Runner, source_id: UUID) -> datetime | None:
    """When the source's last job ran (completed, else started, else queued)."""
    moment: datetime | None = await db.fetchval(sql.LAST_RUN, source_id)
    return moment


async def last_runs(db: Runner, source_ids: list[UUID]) -> dict[UUID, datetime]:
    """`last_run` of several sources in one query (sources that never had a job left out)."""
    rows = await db.fetch(sql.LAST_RUNS, source_ids)
    return {r["source_id"]: r["last_run"] for r in rows}


async def latest_crawl(db: Runner, source_id: UUID) -> asyncpg.Record | None:
    """(params, completed_at) of the source's newest crawl or recrawl."""
    row: asyncpg.Record | None = await db.fetchrow(sql.LATEST_CRAWL, source_id)
    return row


async def job_start(db: Runner, job_id: UUID) -> asyncpg.Record | None:
    """(source_id, since) of a job: its source and the moment its changes are counted from."""
    row: asyncpg.Record | None = await db.fetchrow(sql.SINCE_JOB, job_id)
    return row


async def status_counts(db: Runner) -> dict[str, int]:
    """How many jobs are in each status."""
    return {r["status"]: r["n"] for r in await db.fetch(sql.STATUS_COUNTS)}


async def delete_of_source(conn: asyncpg.Connection, source_id: UUID) -> None:
    """Delete a source's jobs, in the transaction that deletes the source."""
    await conn.execute(sql.DELETE_OF_SOURCE, source_id)


async def has_job(conn: asyncpg.Connection, source_id: UUID) -> bool:
    """Whether any job ever ran for the source (ask with its row locked: a job queued meanwhile waits)."""
    return bool(await conn.fetchval(sql.SOURCE_HAS_JOB, source_id))


async def remove_if_empty(pool: asyncpg.Pool, job_id: UUID) -> str | None:
    """Remove the failed job's own empty source; returns a note for the job's warnings, or None."""
    async with pool.acquire() as conn, conn.transaction():
        title = await conn.fetchval(sql.REMOVE_CREATED_SOURCE, job_id)
        if title is None:
            return None
        note = f"The source '{title}' created for this crawl was removed: nothing was stored in it."
        await conn.execute(sql.ADD_WARNING, job_id, note)
    return note
