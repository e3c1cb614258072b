-- Two-phase indexing (issue 18): a chunk is stored, and keyword-searchable, before it has a vector.
-- A chunk without one (embedding IS NULL) is pending: the embedding backlog (services/documents/
-- backlog.py) claims pending chunks with FOR UPDATE SKIP LOCKED, embeds them and writes the vector
-- once, with embedded_at (which also gives the recent embedding rate for ETAs). The HNSW index skips
-- NULLs; the vector leg filters them out, the keyword leg finds them.
ALTER TABLE chunks ALTER COLUMN embedding DROP NOT NULL;
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS embedded_at timestamptz;
CREATE INDEX IF NOT EXISTS chunks_pending_idx ON chunks (source_id) WHERE embedding IS NULL;
