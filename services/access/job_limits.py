"""Jobs seen through the caller's scope, and the per-caller limit on running crawl/sync jobs.

Every crawl or sync job records who queued it (`started_by`: the token's name, `stdio`, or `local` for
the command line). A token may have at most `max_running_jobs` jobs queued
or running at once (the token's override, else ARCHIVIST_MAX_RUNNING_JOBS_PER_TOKEN); one more answers
RATE_LIMITED, retryable (the queue counts and inserts in one transaction under an advisory lock on the
caller, so concurrent starts on any server process cannot overshoot: services/jobs/queue.py).
"""

from __future__ import annotations

from uuid import UUID

from models.jobs import JobRights
from services.access.profiles import ProfileService
from services.access.scope import Scope, current_scope
from services.core.database import Database
from services.core.errors import NotFound, PermissionDenied
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


async def job_scope(
    db: Database, source_id: UUID, started_by: str | None, local_owner: bool, rights: JobRights | None
) -> Scope:
    """The scope a claimed job runs in: its own source, on behalf of whoever queued it (the local owner
    or not, as recorded when it was queued). A job queued by a caller confined to profiles runs only
    while its source is still within those profiles' writable reach: whichever worker claims it, the
    worker's own reach (every source) never stands in for the caller's. PermissionDenied otherwise."""
    if rights is not None and rights.profiles:
        await check_acting_reach(db, source_id, rights, started_by)
    return Scope.for_job(source_id, started_by, local_owner)


async def check_acting_reach(db: Database, source_id: UUID, rights: JobRights, started_by: str | None) -> None:
    """PermissionDenied unless the profiles the job acts through (enabled, writable) reach its source now."""
    who = rights.acts_for or started_by or "local"
    names = ", ".join(rights.profiles)
    try:
        tenant = await ProfileService(db).scope_for(list(rights.profiles), who=who)
    except NotFound:
        tenant = None
    if tenant is None or tenant.read_only or not tenant.allows(source_id):
        raise PermissionDenied(
            f"This job acts for '{who}' through profile(s) {names}, which no longer "
            f"{'exist or are enabled' if tenant is None else 'reach source ' + str(source_id) + ' writably'}; "
            "it writes nothing.",
            "Add the source to the profile (archivist profile update) and start the job again.",
        )
