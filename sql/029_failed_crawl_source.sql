-- A crawl that fails without storing anything removes the source it created for itself (issue 28:
-- writes that fail create nothing). Its job stays readable, with its errors: the job's source_id
-- becomes NULL instead of the job being deleted with the source. A source deleted on purpose still
-- takes its jobs with it (services/sources.py deletes them in the same transaction).
ALTER TABLE crawl_jobs ADD COLUMN IF NOT EXISTS created_source boolean NOT NULL DEFAULT false;
ALTER TABLE crawl_jobs ALTER COLUMN source_id DROP NOT NULL;
ALTER TABLE crawl_jobs DROP CONSTRAINT IF EXISTS crawl_jobs_source_id_fkey;
ALTER TABLE crawl_jobs ADD CONSTRAINT crawl_jobs_source_id_fkey
    FOREIGN KEY (source_id) REFERENCES sources (id) ON DELETE SET NULL;
