-- Git sources (issue 19): a source bound to a remote repository and kept in sync by `sync` jobs.
ALTER TABLE sources DROP CONSTRAINT IF EXISTS sources_source_type_check;
ALTER TABLE sources ADD CONSTRAINT sources_source_type_check
    CHECK (source_type IN ('upload', 'crawl', 'api', 'folder', 'git'));

-- The repository a git source follows. auth_env is the NAME of an environment variable holding a
-- token: the token itself is never stored.
CREATE TABLE IF NOT EXISTS source_git (
    source_id uuid PRIMARY KEY REFERENCES sources (id) ON DELETE CASCADE,
    url text NOT NULL,
    ref text NOT NULL DEFAULT 'HEAD',
    include_patterns text[] NOT NULL DEFAULT '{{}}',
    exclude_patterns text[] NOT NULL DEFAULT '{{}}',
    auth_env text,
    browse_url text,
    -- The commit the last completed sync reached, and the patterns it applied (others: compare all files).
    last_commit text,
    last_patterns text,
    -- The commit a running sync moves to (kept when its job is handed back to the queue).
    syncing_commit text,
    last_synced_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS source_git_url_idx ON source_git (url, ref);

-- What the last syncs stored of each file: its blob, and the document holding it. Several paths may
-- share one document (identical content); a deleted document drops its rows.
CREATE TABLE IF NOT EXISTS git_files (
    source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    path text NOT NULL,
    blob text NOT NULL,
    document_id uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    synced_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_id, path)
);
CREATE INDEX IF NOT EXISTS git_files_document_idx ON git_files (document_id);
