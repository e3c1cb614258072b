-- Crawl jobs (claimed by workers with FOR UPDATE SKIP LOCKED, kept alive by a heartbeat) and
-- their URL frontier. A job's counters are computed from its frontier, so they stay exact when a
-- worker dies and another one resumes the job.
CREATE TABLE IF NOT EXISTS crawl_jobs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    kind text NOT NULL DEFAULT 'crawl' CHECK (kind IN ('crawl', 'recrawl')),
    status text NOT NULL DEFAULT 'queued'
        CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
    params jsonb NOT NULL,
    error text,
    warnings jsonb NOT NULL DEFAULT '[]'::jsonb,
    cancel_requested boolean NOT NULL DEFAULT false,
    seeded boolean NOT NULL DEFAULT false,
    worker_id text,
    heartbeat_at timestamptz,
    attempts integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    completed_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS crawl_jobs_claim_idx ON crawl_jobs (status, created_at);
CREATE INDEX IF NOT EXISTS crawl_jobs_created_idx ON crawl_jobs (created_at DESC, id);
CREATE INDEX IF NOT EXISTS crawl_jobs_source_idx ON crawl_jobs (source_id, created_at DESC);

-- state: pending -> fetching -> done | failed | skipped | gone (removed from the site: its document
-- was deleted) | redirected (answered with a redirect; the page is crawled under its final URL).
-- origin: start | link | sitemap | llms | redirect | previous (a page a recrawl must find again).
CREATE TABLE IF NOT EXISTS crawl_frontier (
    job_id uuid NOT NULL REFERENCES crawl_jobs (id) ON DELETE CASCADE,
    url text NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    depth integer NOT NULL,
    state text NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'fetching', 'done', 'failed', 'skipped', 'gone', 'redirected')),
    origin text NOT NULL DEFAULT 'link',
    linked boolean NOT NULL DEFAULT true,
    skip_reason text,
    http_status integer,
    error text,
    final_url text,
    etag text,
    last_modified text,
    content_hash text,
    document_id uuid,
    outcome text CHECK (outcome IN ('created', 'updated', 'unchanged', 'deleted')),
    chunks integer NOT NULL DEFAULT 0,
    chunks_embedded integer NOT NULL DEFAULT 0,
    attempts integer NOT NULL DEFAULT 0,
    discovered_at timestamptz NOT NULL DEFAULT now(),
    fetched_at timestamptz,
    PRIMARY KEY (job_id, url)
);
CREATE INDEX IF NOT EXISTS crawl_frontier_pending_idx ON crawl_frontier (job_id, depth, seq) WHERE state = 'pending';
