-- What a job may do, decided when it is queued (models.jobs.JobRights): the folders it reads, the
-- queueing process's allowed paths, whether it may reach private addresses, whom it acts for. A worker
-- claims only the jobs it can honour (services/jobs/sql.py CLAIM). NULL: a job queued before this
-- column, run with the claiming worker's settings as before.
ALTER TABLE crawl_jobs ADD COLUMN IF NOT EXISTS rights jsonb;

-- A job whose work ran to its end but some pages or files failed says so.
ALTER TABLE crawl_jobs DROP CONSTRAINT IF EXISTS crawl_jobs_status_check;
ALTER TABLE crawl_jobs ADD CONSTRAINT crawl_jobs_status_check
    CHECK (status IN ('queued', 'running', 'completed', 'completed_with_errors', 'failed', 'cancelled'));

-- The workers running now (services/jobs/registry.py): each registers when it starts, beats while it
-- runs and leaves when it stops, with what it can honour, so `crawl --detach` can warn that no worker
-- can take a job and `doctor` can tell running workers from its own process.
CREATE TABLE IF NOT EXISTS job_workers (
    id text PRIMARY KEY,
    started_at timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    allow_private boolean NOT NULL DEFAULT false,
    allowed_paths jsonb NOT NULL DEFAULT '[]'::jsonb
);
