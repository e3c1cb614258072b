-- Impact-ordered postings for the BM25 keyword leg (services/search/bm25.py).
-- A posting's impact is its term's BM25 contribution without the idf,
--     impact = tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)),   k1 1.2, b 0.75,
-- with the corpus' average chunk length when the row was written. chunk_terms_impact_idx keeps each
-- term's postings in impact order, so the keyword leg reads only the K best postings of each query
-- term (an index-only range, source filter included), picks candidates by sum(idf * impact), and then
-- scores just those candidates with exact BM25 (the current avgdl and the configured k1 / b). The
-- write-time avgdl only orders postings; no score the search returns depends on it.
-- bm25_chunks_inserted / _updated below replace sql/004's versions (same triggers); they also compute
-- each chunk's length once, not once per lexeme.

ALTER TABLE chunk_terms ADD COLUMN IF NOT EXISTS impact real;

CREATE OR REPLACE FUNCTION bm25_avgdl() RETURNS float8 LANGUAGE sql STABLE AS $$
    SELECT greatest(coalesce(sum(length)::float8 / nullif(sum(chunks), 0), 1.0), 1.0) FROM bm25_totals
$$;

CREATE OR REPLACE FUNCTION bm25_impact(tf integer, dl integer, avgdl float8) RETURNS real
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl)))::real
$$;

CREATE OR REPLACE FUNCTION bm25_chunks_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    avgdl float8;
BEGIN
    INSERT INTO bm25_totals (chunks, length)
    SELECT count(*), coalesce(sum(tsvector_length(tsv)), 0) FROM added HAVING count(*) > 0;
    avgdl := bm25_avgdl();
    INSERT INTO chunk_terms (term, chunk_id, source_id, tf, dl, impact)
    SELECT u.lexeme, n.id, n.source_id, coalesce(array_length(u.positions, 1), 1), n.dl,
           bm25_impact(coalesce(array_length(u.positions, 1), 1), n.dl, avgdl)
    FROM (SELECT id, source_id, tsv, tsvector_length(tsv) AS dl FROM added OFFSET 0) n, unnest(n.tsv) u;
    PERFORM bm25_fold_totals();
    RETURN NULL;
END
$$;

-- Only rows whose text (tsv) changed are re-indexed: re-embedding touches every row but no text.
CREATE OR REPLACE FUNCTION bm25_chunks_updated() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    avgdl float8;
BEGIN
    DELETE FROM chunk_terms t USING before_rows o, after_rows n, unnest(o.tsv) u
    WHERE n.id = o.id AND (o.tsv IS DISTINCT FROM n.tsv OR o.source_id IS DISTINCT FROM n.source_id)
      AND t.term = u.lexeme AND t.chunk_id = o.id;
    INSERT INTO bm25_totals (chunks, length)
    SELECT 0, sum(tsvector_length(n.tsv) - tsvector_length(o.tsv))
    FROM after_rows n JOIN before_rows o ON o.id = n.id WHERE o.tsv IS DISTINCT FROM n.tsv HAVING count(*) > 0;
    avgdl := bm25_avgdl();
    INSERT INTO chunk_terms (term, chunk_id, source_id, tf, dl, impact)
    SELECT u.lexeme, n.id, n.source_id, coalesce(array_length(u.positions, 1), 1), n.dl,
           bm25_impact(coalesce(array_length(u.positions, 1), 1), n.dl, avgdl)
    FROM (
        SELECT n.id, n.source_id, n.tsv, tsvector_length(n.tsv) AS dl
        FROM after_rows n JOIN before_rows o ON o.id = n.id
        WHERE o.tsv IS DISTINCT FROM n.tsv OR o.source_id IS DISTINCT FROM n.source_id
        OFFSET 0  -- one length per chunk, not one per lexeme
    ) n, unnest(n.tsv) u;
    RETURN NULL;
END
$$;

-- Existing postings get their impact from the current totals.
UPDATE chunk_terms SET impact = bm25_impact(tf, dl, bm25_avgdl()) WHERE impact IS NULL;
ALTER TABLE chunk_terms ALTER COLUMN impact SET NOT NULL;

CREATE INDEX IF NOT EXISTS chunk_terms_impact_idx ON chunk_terms (term, impact DESC) INCLUDE (chunk_id, source_id);
