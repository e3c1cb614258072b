-- Versioned sources and folder sources kept in sync.
-- A source may carry a version: several sources may share a title (one per version).
ALTER TABLE sources ADD COLUMN IF NOT EXISTS version text;
CREATE INDEX IF NOT EXISTS sources_title_lower_idx ON sources (lower(title));

-- Migration 006 (when present) makes (title, url) unique; with versions the identity includes the version.
-- Recreated only where 006 created it, so databases without 006 keep accepting duplicate titles.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_indexes WHERE indexname = 'sources_identity_uq') THEN
        DROP INDEX IF EXISTS sources_identity_uq;
        CREATE UNIQUE INDEX sources_identity_uq ON sources (lower(title), coalesce(url, ''), coalesce(version, ''));
    END IF;
END $$;

ALTER TABLE sources DROP CONSTRAINT IF EXISTS sources_source_type_check;
ALTER TABLE sources ADD CONSTRAINT sources_source_type_check
    CHECK (source_type IN ('upload', 'crawl', 'api', 'folder'));

ALTER TABLE crawl_jobs DROP CONSTRAINT IF EXISTS crawl_jobs_kind_check;
ALTER TABLE crawl_jobs ADD CONSTRAINT crawl_jobs_kind_check CHECK (kind IN ('crawl', 'recrawl', 'sync'));

-- The directory a folder source is bound to, and which files of it belong to the source.
CREATE TABLE IF NOT EXISTS source_folders (
    source_id uuid PRIMARY KEY REFERENCES sources (id) ON DELETE CASCADE,
    path text NOT NULL,
    include_patterns text[] NOT NULL DEFAULT '{{}}',
    exclude_patterns text[] NOT NULL DEFAULT '{{}}',
    recursive boolean NOT NULL DEFAULT true,
    last_synced_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- What the last sync saw of each file: unchanged size + mtime means the file is not read again.
-- Several paths may share one document (identical content); a deleted document drops its rows.
CREATE TABLE IF NOT EXISTS folder_files (
    source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    path text NOT NULL,
    size bigint NOT NULL,
    mtime_ns bigint NOT NULL,
    content_hash text NOT NULL,
    document_id uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    synced_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_id, path)
);
CREATE INDEX IF NOT EXISTS folder_files_document_idx ON folder_files (document_id);
