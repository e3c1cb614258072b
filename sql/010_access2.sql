-- Crawl starts are limited per caller: who queued each job (token name, `stdio`, or `local` for the
-- command line), and an optional per-token override of the running-jobs limit.
ALTER TABLE crawl_jobs ADD COLUMN IF NOT EXISTS started_by text;
CREATE INDEX IF NOT EXISTS crawl_jobs_started_by_active_idx ON crawl_jobs (started_by)
    WHERE status IN ('queued', 'running');
ALTER TABLE access_tokens ADD COLUMN IF NOT EXISTS max_running_jobs integer;
