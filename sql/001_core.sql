-- Core schema: sources, documents, chunks. Placeholders {embedding_dim} and {fts_config}
-- are filled from archivist_config (recorded the first time the database is set up).
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE IF NOT EXISTS sources (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    title text NOT NULL,
    description text,
    url text,
    source_type text NOT NULL DEFAULT 'upload' CHECK (source_type IN ('upload', 'crawl', 'api')),
    status text NOT NULL DEFAULT 'active',
    metadata jsonb NOT NULL DEFAULT '{{}}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS sources_created_idx ON sources (created_at DESC, id);

CREATE TABLE IF NOT EXISTS documents (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    title text NOT NULL,
    url text,
    document_type text NOT NULL DEFAULT 'text',
    content text NOT NULL,
    content_hash text NOT NULL,
    metadata jsonb NOT NULL DEFAULT '{{}}'::jsonb,
    chunk_count integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT documents_source_url_key UNIQUE (source_id, url)
);
CREATE INDEX IF NOT EXISTS documents_source_created_idx ON documents (source_id, created_at, id);
CREATE INDEX IF NOT EXISTS documents_source_hash_idx ON documents (source_id, content_hash);

CREATE TABLE IF NOT EXISTS chunks (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    document_id uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    chunk_index integer NOT NULL,
    text text NOT NULL,
    char_start integer NOT NULL,
    char_end integer NOT NULL,
    heading_path text[] NOT NULL DEFAULT '{{}}',
    -- document title + heading path: searched by the keyword leg along with the text
    context text NOT NULL DEFAULT '',
    embedding vector({embedding_dim}) NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('{fts_config}'::regconfig, context || ' ' || text)) STORED,
    CONSTRAINT chunks_document_index_key UNIQUE (document_id, chunk_index)
);
CREATE INDEX IF NOT EXISTS chunks_embedding_hnsw_idx ON chunks USING hnsw (embedding vector_cosine_ops);
CREATE INDEX IF NOT EXISTS chunks_tsv_gin_idx ON chunks USING gin (tsv);
CREATE INDEX IF NOT EXISTS chunks_source_idx ON chunks (source_id);
