"""A crawl whose every page failed removes the source it created for itself when nothing is in it.

Writes that fail create nothing (issue 28): `crawl_website start` creates a source named after the
site before any page is fetched, so a crawl whose start page is missing or unreachable would leave an
empty source behind. The job itself stays (sql/029: its source_id becomes NULL) so its status and
page errors can still be read, by whoever started it. A job that fails before fetching (a login
variable unset since it was queued, a refused address) keeps its source, to be re-crawled once fixed.
"""

from __future__ import annotations

from uuid import UUID

import asyncpg

from services.jobs import sql as job_sql


async def remove_if_empty(pool: asyncpg.Pool, job_id: UUID) -> str | None:
    """Remove the failed job's own empty source; returns a note for the job's warnings, or None."""
    async with pool.acquire() as conn, conn.transaction():
        title = await conn.fetchval(job_sql.REMOVE_CREATED_SOURCE, job_id)
        if title is None:
            return None
        note = f"The source '{title}' created for this crawl was removed: nothing was stored in it."
        await conn.execute(job_sql.ADD_WARNING, job_id, note)
    return note
