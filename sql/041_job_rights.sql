-- What a job may do, decided when it is queued (models.jobs.JobRights): the folders it reads, the
-- queueing process's allowed paths, whether it may reach private addresses, whom it acts for. A worker
-- claims only the jobs it can honour (services/jobs/sql.py CLAIM). NULL: a job queued before this
-- column, run with the claiming worker's settings as before.
ALTER TABLE crawl_jobs ADD COLUMN IF NOT EXISTS rights jsonb;

-- A job whose work ran to its end but some pages or files failed says so.
ALTER TABLE crawl_jobs DROP CONSTRAINT IF EXISTS crawl_jobs_status_check;
ALTER TABLE crawl_jobs ADD CONSTRAINT crawl_jobs_status_check
    CHECK (status IN ('queued', 'running', 'completed', 'completed_with_errors', 'failed', 'cancelled'));
