-- Politeness shared by every crawl worker process: the earliest time the next request to a host may
-- start. Workers reserve their start time with one atomic upsert, so the minimum delay between
-- requests to one host holds across processes. (Per-host concurrency across processes uses
-- session advisory locks, released by PostgreSQL if a worker dies.)
CREATE TABLE IF NOT EXISTS crawl_hosts (
    host text PRIMARY KEY,
    next_start timestamptz NOT NULL
);
