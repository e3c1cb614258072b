-- A git sync is a job kind of its own ('git'), so the worker picks its runner from the kind alone
-- (issue 31, point 1). Syncs of git sources queued before this migration were kind 'sync': they become
-- 'git', whatever their status, so they keep running (and read) as they did.
ALTER TABLE crawl_jobs DROP CONSTRAINT IF EXISTS crawl_jobs_kind_check;
ALTER TABLE crawl_jobs ADD CONSTRAINT crawl_jobs_kind_check CHECK (kind IN ('crawl', 'recrawl', 'sync', 'git'));
UPDATE crawl_jobs j SET kind = 'git' FROM sources s WHERE j.kind = 'sync' AND s.id = j.source_id AND s.source_type = 'git';
