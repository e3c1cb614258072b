-- Profiles (scoped sources + search defaults), access tokens (hash only), audit log, rate-limit buckets.
CREATE TABLE IF NOT EXISTS profiles (
    name text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_-]{{0,62}}$'),
    description text NOT NULL DEFAULT '',
    source_ids uuid[] NOT NULL DEFAULT '{{}}',
    search_type text CHECK (search_type IN ('vector', 'hybrid', 'rerank')),
    match_count integer,
    similarity_threshold double precision,
    keyword_weight double precision,
    read_only boolean NOT NULL DEFAULT false,
    enabled boolean NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS access_tokens (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name text NOT NULL UNIQUE,
    token_hash text NOT NULL UNIQUE,
    prefix text NOT NULL,
    profiles text[] NOT NULL DEFAULT '{{}}',
    read_only boolean NOT NULL DEFAULT false,
    rate_per_minute integer,
    expires_at timestamptz,
    revoked_at timestamptz,
    last_used_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS audit_log (
    id bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now(),
    tool text NOT NULL,
    action text,
    who text NOT NULL,
    profiles text[] NOT NULL DEFAULT '{{}}',
    arguments jsonb NOT NULL DEFAULT '{{}}'::jsonb,
    error_code text,
    latency_ms double precision NOT NULL,
    response_bytes integer NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS audit_log_at_idx ON audit_log (at DESC);

CREATE TABLE IF NOT EXISTS rate_buckets (
    key text PRIMARY KEY,
    tokens double precision NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
