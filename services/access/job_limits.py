"""Jobs seen through the caller's scope, and the per-caller limit on running crawl/sync jobs.

Every crawl or sync job records who queued it (`started_by`: the token's name, `stdio`, or `local` for
the command line). A token may have at most `max_running_jobs` jobs queued
or running at once (the token's override, else ARCHIVIST_MAX_RUNNING_JOBS_PER_TOKEN); one more answers
RATE_LIMITED, retryable. The count and the insert share a transaction under an advisory lock on the
caller, so concurrent starts (on any server process) cannot overshoot.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from models.jobs import ACTIVE_STATUSES
from services.access.scope import Scope, current_scope
from services.errors import RateLimited
from services.settings import Settings

#: Seconds suggested to wait when over the running-jobs limit (a job's progress is worth a look first).
RETRY_AFTER_SECONDS = 30.0
#: The local owner: the command line, stdio and unauthenticated loopback HTTP (they share one rate bucket).
UNLIMITED_CALLERS = frozenset({"local", "stdio"})


def scoped_ids(scope: Scope | None = None) -> list[UUID] | None:
    """The caller's source ids as a query parameter (None = every source)."""
    ids = (scope or current_scope()).source_ids
    return None if ids is None else list(ids)


def running_limit(scope: Scope, settings: Settings) -> int | None:
    if scope.who in UNLIMITED_CALLERS:
        return None
    return scope.max_running_jobs or int(settings.max_running_jobs_per_token)


async def insert_job(db: Any, settings: Settings, source_id: UUID, kind: str, params: dict[str, Any]) -> UUID:
    """Queue one job for the current caller, within its running-jobs limit."""
    scope = current_scope()
    limit = running_limit(scope, settings)
    async with db.pool.acquire() as conn, conn.transaction():
        if limit is not None:
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('archivist-jobs:' || $1))", scope.who)
            active = await conn.fetchval(
                "SELECT count(*) FROM crawl_jobs WHERE started_by = $1 AND status = ANY($2::text[])",
                scope.who,
                list(ACTIVE_STATUSES),
            )
            if active >= limit:
                exc = RateLimited(
                    f"{active} crawl/sync jobs of '{scope.who}' are already queued or running (the limit is {limit}).",
                    "Wait for one to finish (crawl_website(action='list', status='running')), or cancel one; "
                    f"retry in {RETRY_AFTER_SECONDS:g} seconds.",
                )
                exc.retry_after_seconds = RETRY_AFTER_SECONDS  # type: ignore[attr-defined]
                raise exc
        job_id: UUID = await conn.fetchval(
            "INSERT INTO crawl_jobs (source_id, kind, params, started_by, local_owner) "
            "VALUES ($1, $2, $3, $4, $5) RETURNING id",
            source_id,
            kind,
            params,
            scope.who,
            scope.local_owner,
        )
        return job_id


async def job_scope(db: Any, job_id: UUID, source_id: UUID) -> Scope:
    """The scope a claimed job runs in: its own source, on behalf of whoever queued it (the local owner
    or not, as recorded when it was queued)."""
    row = await db.pool.fetchrow("SELECT started_by, local_owner FROM crawl_jobs WHERE id = $1", job_id)
    if row is None:
        return Scope.for_job(source_id, None)
    return Scope.for_job(source_id, row["started_by"], bool(row["local_owner"]))
