"""Every statement on the jobs table (`crawl_jobs`), in one place.

They are run only inside services/jobs/: the queue (queue.py), the frontier (frontier.py: a recrawl's
known pages) and sources.py, which answers what other services ask about a source (its last run, its
latest crawl, the changes since a job, the health report's counts, its jobs deleted with it), so the
table's shape is spelled once and no other package runs SQL on it (tests/test_architecture.py).

A job's counters are computed from its frontier on every read (COUNTERS_JOIN), so they stay exact
even after a worker died mid-job and another one resumed it. How fresh its pages are in the index
(two-phase indexing): `pages_searchable` (stored, keyword-searchable), `chunks_embedded` and
`chunks_pending` of the chunks the job wrote, and the seconds the pending ones should take at the rate
the job's chunks were embedded over the last minute.
"""

from __future__ import annotations

JOB_COLUMNS = """
    j.id, j.source_id, j.kind, j.status, j.params, j.rights, j.error, j.warnings, j.cancel_requested,
    j.worker_id, j.attempts, j.created_at, j.started_at, j.completed_at, j.heartbeat_at,
    c.pages_crawled, c.pages_failed, c.pages_pending, c.pages_skipped, c.documents_created,
    c.documents_updated, c.documents_unchanged, c.documents_deleted, c.total_chunks, c.pages_searchable,
    greatest(c.chunks_written - e.chunks_pending, 0) AS chunks_embedded, e.chunks_pending,
    CASE WHEN e.chunks_pending = 0 THEN 0
         WHEN e.recent > 0 THEN round(e.chunks_pending * greatest(e.recent_seconds, 1) / e.recent, 1)::float8
    END AS embedding_eta_seconds,
    coalesce((SELECT jsonb_object_agg(s.reason, s.n) FROM (
        SELECT coalesce(f.skip_reason, 'other') AS reason, count(*) AS n FROM crawl_frontier f
        WHERE f.job_id = j.id AND f.state = 'skipped' GROUP BY 1) s), '{}'::jsonb) AS skipped_by_reason
"""
COUNTERS_JOIN = """
    CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE f.state = 'done') AS pages_crawled,
               count(*) FILTER (WHERE f.state = 'failed') AS pages_failed,
               count(*) FILTER (WHERE f.state IN ('pending', 'fetching') AND f.linked)
                 -- a crawl queued (or just claimed) before its frontier is seeded: the start URL is pending
                 + CASE WHEN count(*) = 0 AND j.kind IN ('crawl', 'recrawl') AND j.status IN ('queued', 'running')
                        THEN 1 ELSE 0 END AS pages_pending,
               count(*) FILTER (WHERE f.state = 'skipped') AS pages_skipped,
               count(*) FILTER (WHERE f.outcome = 'created') AS documents_created,
               count(*) FILTER (WHERE f.outcome = 'updated') AS documents_updated,
               count(*) FILTER (WHERE f.outcome = 'unchanged') AS documents_unchanged,
               count(*) FILTER (WHERE f.outcome = 'deleted') AS documents_deleted,
               coalesce(sum(f.chunks) FILTER (WHERE f.state = 'done'), 0) AS total_chunks,
               coalesce(sum(f.chunks_embedded), 0) AS chunks_written,
               count(*) FILTER (WHERE f.state = 'done' AND f.document_id IS NOT NULL) AS pages_searchable
        FROM crawl_frontier f WHERE f.job_id = j.id
    ) c
    CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE ch.embedding IS NULL) AS chunks_pending,
               count(*) FILTER (WHERE ch.embedded_at > now() - interval '60 seconds') AS recent,
               extract(epoch FROM now() - min(ch.embedded_at)
                   FILTER (WHERE ch.embedded_at > now() - interval '60 seconds'))::numeric AS recent_seconds
        FROM chunks ch WHERE ch.document_id IN (
            SELECT f.document_id FROM crawl_frontier f WHERE f.job_id = j.id AND f.chunks_embedded > 0)
    ) e
"""

# ---------- queueing ----------

#: one caller's jobs are counted and inserted under this lock, so concurrent starts cannot overshoot
LOCK_CALLER = "SELECT pg_advisory_xact_lock(hashtext('archivist-jobs:' || $1))"
COUNT_ACTIVE_OF_CALLER = "SELECT count(*) FROM crawl_jobs WHERE started_by = $1 AND status = ANY($2::text[])"
INSERT = (
    "INSERT INTO crawl_jobs (source_id, kind, params, started_by, local_owner, created_source, rights) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id"
)
QUEUED_OF_SOURCE = (
    "SELECT id FROM crawl_jobs WHERE source_id = $1 AND kind = $2 AND status = 'queued' "
    "AND NOT cancel_requested ORDER BY created_at LIMIT 1"
)
ACTIVE_OF_SOURCE = (
    "SELECT id, status FROM crawl_jobs WHERE source_id = $1 AND status = ANY($2::text[]) "
    "ORDER BY created_at DESC LIMIT 1"
)
#: the newest job of some kinds, of a source or started at a URL, among the caller's sources
LATEST_OF_KINDS = (
    "SELECT source_id, params FROM crawl_jobs WHERE kind = ANY($1::text[]) "
    "AND ($2::uuid IS NULL OR source_id = $2) AND ($3::text IS NULL OR params->>'url' = $3) "
    "AND ($4::uuid[] IS NULL OR source_id = ANY($4::uuid[])) ORDER BY created_at DESC LIMIT 1"
)

# ---------- reading ----------

SELECT_ONE = f"SELECT {JOB_COLUMNS}, j.started_by FROM crawl_jobs j {COUNTERS_JOIN} WHERE j.id = $1"
RECENT_ERRORS = (
    "SELECT url, error, http_status FROM crawl_frontier WHERE job_id = $1 AND state = 'failed' "
    "ORDER BY fetched_at DESC NULLS LAST, seq DESC LIMIT $2"
)
#: fetch_page's FROM ... WHERE: one status and/or source, seen through the caller's scope
LIST_FROM = (
    "crawl_jobs j WHERE ($1::text IS NULL OR j.status = $1) AND ($2::uuid IS NULL OR j.source_id = $2) "
    "AND ($3::uuid[] IS NULL OR j.source_id = ANY($3::uuid[]) OR (j.source_id IS NULL AND j.started_by = $4))"
)
LIST_ORDER = "j.created_at DESC, j.id"

# ---------- cancelling ----------

#: a queued job (or one whose worker stopped heart-beating) is cancelled at once; a running one by its worker
CANCEL = (
    "UPDATE crawl_jobs SET cancel_requested = true, updated_at = now(), "
    "status = CASE WHEN status = 'queued' OR heartbeat_at < now() - make_interval(secs => $2) "
    "  THEN 'cancelled' ELSE status END, "
    "completed_at = CASE WHEN status = 'queued' OR heartbeat_at < now() - make_interval(secs => $2) "
    "  THEN now() ELSE completed_at END "
    "WHERE id = $1 AND status IN ('queued', 'running') RETURNING status"
)
CANCEL_REQUESTED = "SELECT cancel_requested FROM crawl_jobs WHERE id = $1"
#: the frontier rows a stopped (or cancelled) job left mid-fetch go back to pending
RECOVER_FETCHING = "UPDATE crawl_frontier SET state = 'pending' WHERE job_id = $1 AND state = 'fetching'"

# ---------- the worker's side ----------


def honours(private: str, roots: str, secrets: str) -> str:
    """Whether this worker can honour a job's rights (models.jobs.JobRights): it allows private addresses
    if the job does (parameter `private`), every folder the job reads lies under one of its own
    allowed roots (parameter `roots`, resolved), and it holds every secret the job sends (parameter
    `secrets`: the names of its set environment variables); a job queued before rights were stored
    (NULL) runs anywhere, as before."""
    return (
        f"(j.rights IS NULL OR ((NOT coalesce((j.rights->>'allow_private')::boolean, false) OR {private}::boolean) "
        " AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(coalesce(j.rights->'paths', '[]'::jsonb)) p "
        f"   WHERE NOT EXISTS (SELECT 1 FROM unnest({roots}::text[]) r "
        "     WHERE p.value = r OR starts_with(p.value, rtrim(r, '/') || '/'))) "
        " AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(coalesce(j.rights->'secret_names', '[]'::jsonb)) s "
        f"   WHERE s.value <> ALL({secrets}::text[]))))"
    )


#: the oldest job this worker can honour, queued or left by a worker that stopped heart-beating
CLAIM = (
    "UPDATE crawl_jobs SET status = 'running', worker_id = $1, heartbeat_at = now(), "
    "attempts = attempts + 1, started_at = coalesce(started_at, now()), updated_at = now() "
    "WHERE id = (SELECT j.id FROM crawl_jobs j WHERE (j.status = 'queued' "
    "  OR (j.status = 'running' AND j.heartbeat_at < now() - make_interval(secs => $2))) "
    f"  AND {honours('$3', '$4', '$5')} "
    "  ORDER BY j.created_at FOR UPDATE SKIP LOCKED LIMIT 1) "
    "RETURNING id, started_by, local_owner"
)
#: queued jobs this worker cannot honour that have waited longer than $4 seconds for one that can
UNHONOURED = (
    "SELECT j.id, j.rights FROM crawl_jobs j WHERE j.status = 'queued' AND NOT j.cancel_requested "
    "  AND j.created_at < now() - make_interval(secs => $4) "
    f"  AND NOT {honours('$1', '$2', '$3')} ORDER BY j.created_at LIMIT 5"
)
#: fail a job nobody could honour (still queued: no worker took it meanwhile)
FAIL_QUEUED = (
    "UPDATE crawl_jobs SET status = 'failed', error = $2, completed_at = now(), updated_at = now() "
    "WHERE id = $1 AND status = 'queued' RETURNING id"
)
HEARTBEAT = (
    "UPDATE crawl_jobs SET heartbeat_at = now() WHERE id = $1 AND worker_id = $2 AND status = 'running' "
    "RETURNING cancel_requested"
)
RELEASE = (
    "UPDATE crawl_jobs SET status = 'queued', worker_id = NULL, heartbeat_at = NULL, "
    "attempts = greatest(attempts - 1, 0), updated_at = now() "
    "WHERE id = $1 AND worker_id = $2 AND status = 'running' RETURNING id"
)
FINISH = (
    "UPDATE crawl_jobs SET status = $3, error = $4, warnings = $5, completed_at = now(), "
    "heartbeat_at = now(), updated_at = now() "
    "WHERE id = $1 AND worker_id = $2 AND status = 'running' RETURNING id"
)
SEEDED = "SELECT seeded FROM crawl_jobs WHERE id = $1"
MARK_SEEDED = "UPDATE crawl_jobs SET seeded = true WHERE id = $1"
ADD_WARNING = "UPDATE crawl_jobs SET warnings = warnings || jsonb_build_array($2::text) WHERE id = $1"
#: the source of this job, if the job created it and it holds no document and no other job
REMOVE_CREATED_SOURCE = """
DELETE FROM sources s
 USING crawl_jobs j
 WHERE j.id = $1 AND j.created_source AND s.id = j.source_id
   AND NOT EXISTS (SELECT 1 FROM documents d WHERE d.source_id = s.id)
   AND NOT EXISTS (SELECT 1 FROM crawl_jobs o WHERE o.source_id = s.id AND o.id <> j.id)
RETURNING s.title
"""
#: (url, depth, rank) of the pages a source holds from the crawl of `root` ($2), as the last job of the
#: source that fetched each found it ($4: this job, left out), in the order a recrawl revisits them
KNOWN_PAGES = (
    "SELECT d.url, coalesce(p.depth, CASE WHEN d.metadata->>'crawl_depth' ~ '^[0-9]{1,6}$' "
    "  THEN (d.metadata->>'crawl_depth')::int END, $3) AS depth, nullif(p.rank, '{}') AS rank "
    "FROM documents d LEFT JOIN LATERAL (SELECT f.depth, f.rank, f.seq FROM crawl_jobs j "
    "  JOIN crawl_frontier f ON f.job_id = j.id AND f.url = d.url AND f.state = 'done' "
    "  WHERE j.source_id = d.source_id AND j.id <> $4 ORDER BY j.created_at DESC LIMIT 1) p ON true "
    "WHERE d.source_id = $1 AND d.url IS NOT NULL AND d.metadata->>'crawl_root' = $2 "
    "ORDER BY 2, 3 NULLS LAST, p.seq NULLS LAST, d.url"
)

# ---------- read (or removed) by other services ----------

DELETE_OF_SOURCE = "DELETE FROM crawl_jobs WHERE source_id = $1"
#: whether any job ever ran for a source
SOURCE_HAS_JOB = "SELECT EXISTS (SELECT 1 FROM crawl_jobs WHERE source_id = $1)"
LAST_RUNS = (
    "SELECT source_id, max(coalesce(completed_at, started_at, created_at)) AS last_run FROM crawl_jobs "
    "WHERE source_id = ANY($1::uuid[]) GROUP BY source_id"
)
LAST_RUN = "SELECT max(coalesce(completed_at, started_at, created_at)) FROM crawl_jobs WHERE source_id = $1"
STATUS_COUNTS = "SELECT status, count(*) AS n FROM crawl_jobs GROUP BY status"
LATEST_CRAWL = (
    "SELECT params, completed_at FROM crawl_jobs WHERE source_id = $1 AND kind IN ('crawl', 'recrawl') "
    "ORDER BY created_at DESC LIMIT 1"
)
#: the source of a job and the moment its changes are counted from
SINCE_JOB = "SELECT source_id, coalesce(started_at, created_at) AS since FROM crawl_jobs WHERE id = $1"

# ---------- the workers running now (registry.py) ----------

REGISTER_WORKER = (
    "INSERT INTO job_workers (id, allow_private, allowed_paths) VALUES ($1, $2, $3) "
    "ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), allow_private = EXCLUDED.allow_private, "
    "allowed_paths = EXCLUDED.allowed_paths"
)
BEAT_WORKER = "UPDATE job_workers SET heartbeat_at = now() WHERE id = $1 RETURNING id"
LEAVE_WORKER = "DELETE FROM job_workers WHERE id = $1"
#: workers that beat within $1 seconds (and the long-dead ones are forgotten)
LIVE_WORKERS = (
    "SELECT id, started_at, heartbeat_at, allow_private, allowed_paths FROM job_workers "
    "WHERE heartbeat_at > now() - make_interval(secs => $1) ORDER BY started_at"
)
FORGET_DEAD_WORKERS = "DELETE FROM job_workers WHERE heartbeat_at < now() - interval '1 day'"
