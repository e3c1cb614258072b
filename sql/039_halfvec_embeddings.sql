-- Half-size vectors: every chunk's embedding is converted to halfvec and the HNSW graph rebuilt (minutes per million chunks).
-- halfvec (pgvector >= 0.7) stores each dimension in 2 bytes instead of 4: a 384-dimension vector
-- takes 776 bytes instead of 1,544, in the table and in the HNSW graph, which is what most of a
-- search's reads are. Cosine distances change by less than the rounding of the scores (bge-small
-- vectors are unit length; half precision keeps ~3 significant digits), and SciFact's figures stay
-- within noise (docs/performance.md). Queries pass their vector as halfvec too (the parameter takes
-- the column's type). The conversion runs inside the migration's transaction: if it fails, nothing
-- has changed and the server keeps the float32 layout.
DROP INDEX IF EXISTS chunks_embedding_hnsw_idx;
ALTER TABLE chunks ALTER COLUMN embedding TYPE halfvec({embedding_dim}) USING embedding::halfvec({embedding_dim});
CREATE INDEX IF NOT EXISTS chunks_embedding_hnsw_idx ON chunks USING hnsw (embedding halfvec_cosine_ops);
