"""A crawl whose every page failed removes the source it created for itself when nothing is in it.

Writes that fail create nothing (issue 28): `crawl_website start` creates a source named after the
site before any page is fetched, so a crawl whose start page is missing or unreachable would leave an
empty source behind. The job itself stays (sql/029: its source_id becomes NULL) so its status and
page errors can still be read, by whoever started it. A job that fails before fetching (a login
variable unset since it was queued, a refused address) keeps its source, to be re-crawled once fixed.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

#: the source of this job, if the job created it and it holds no document and no other job
REMOVE_SQL = """
DELETE FROM sources s
 USING crawl_jobs j
 WHERE j.id = $1 AND j.created_source AND s.id = j.source_id
   AND NOT EXISTS (SELECT 1 FROM documents d WHERE d.source_id = s.id)
   AND NOT EXISTS (SELECT 1 FROM crawl_jobs o WHERE o.source_id = s.id AND o.id <> j.id)
RETURNING s.title
"""


async def remove_if_empty(db: Any, job_id: UUID) -> str | None:
    """Remove the failed job's own empty source; returns a note for the job's warnings, or None."""
    async with db.pool.acquire() as conn, conn.transaction():
        title = await conn.fetchval(REMOVE_SQL, job_id)
        if title is None:
            return None
        note = f"The source '{title}' created for this crawl was removed: nothing was stored in it."
        await conn.execute(
            "UPDATE crawl_jobs SET warnings = warnings || jsonb_build_array($2::text) WHERE id = $1", job_id, note
        )
    return note
