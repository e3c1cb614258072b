"""SQL of a crawl job as read everywhere: its columns and counters computed from the frontier.

How fresh its pages are in the index (two-phase indexing): `pages_searchable` (stored, keyword-
searchable), `chunks_embedded` and `chunks_pending` of the chunks the job wrote, and the seconds the
pending ones should take at the rate the job's chunks were embedded over the last minute."""

JOB_COLUMNS = """
    j.id, j.source_id, j.kind, j.status, j.params, j.error, j.warnings, j.cancel_requested,
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
                 + CASE WHEN count(*) = 0 AND j.kind <> 'sync' AND j.status IN ('queued', 'running')
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
