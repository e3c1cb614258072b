"""Jobs seen through the caller's scope, and the per-caller limit on running crawl/sync jobs.

Every crawl or sync job records who queued it (`started_by`: the token's name, `stdio`, or `local` for
the command line). A token may have at most `max_running_jobs` jobs queued
or running at once (the token's override, else ARCHIVIST_MAX_RUNNING_JOBS_PER_TOKEN); one more answers
RATE_LIMITED, retryable (the queue counts and inserts in one transaction under an advisory lock on the
caller, so concurrent starts on any server process cannot overshoot: services/jobs/queue.py).
"""

from __future__ import annotations

from uuid import UUID

from services.access.scope import Scope, current_scope
from services.core.settings import Settings

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


def job_scope(source_id: UUID, started_by: str | None, local_owner: bool) -> Scope:
    """The scope a claimed job runs in: its own source, on behalf of whoever queued it (the local owner
    or not, as recorded when it was queued)."""
    return Scope.for_job(source_id, started_by, local_owner)
