-- BM25 for the keyword leg, computed inside PostgreSQL (services/search/bm25.py).
-- chunk_terms is an inverted index of chunks.tsv: one row per (lexeme, chunk) with the term's
-- frequency in the chunk (tf) and the chunk's length in lexemes (dl). A term's document frequency
-- is the number of its rows (an index range on the primary key); bm25_totals holds the corpus size
-- and total length as rows of deltas. Statement-level triggers on chunks keep both in step with
-- every insert, update and delete (including deletes cascaded from documents and sources).

CREATE TABLE IF NOT EXISTS chunk_terms (
    term text NOT NULL,
    chunk_id uuid NOT NULL,
    source_id uuid NOT NULL,
    tf integer NOT NULL,
    dl integer NOT NULL,
    PRIMARY KEY (term, chunk_id)
);

-- Sum of all rows = (number of chunks, total length of all chunks in lexemes). Writers only append
-- delta rows (no row is a lock hot spot); whoever gets the advisory lock folds them into one row.
CREATE TABLE IF NOT EXISTS bm25_totals (
    chunks bigint NOT NULL,
    length bigint NOT NULL
);

-- Occurrences of every lexeme in a tsvector (a lexeme stored without positions counts once).
CREATE OR REPLACE FUNCTION tsvector_length(v tsvector) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0)::integer FROM unnest(v) u
$$;

CREATE OR REPLACE FUNCTION bm25_fold_totals() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT count(*) FROM bm25_totals) > 16 AND pg_try_advisory_xact_lock(1112354101) THEN
        WITH gone AS (DELETE FROM bm25_totals RETURNING chunks, length)
        INSERT INTO bm25_totals (chunks, length) SELECT sum(chunks), sum(length) FROM gone HAVING count(*) > 0;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION bm25_chunks_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chunk_terms (term, chunk_id, source_id, tf, dl)
    SELECT u.lexeme, n.id, n.source_id, coalesce(array_length(u.positions, 1), 1), tsvector_length(n.tsv)
    FROM added n, unnest(n.tsv) u;
    INSERT INTO bm25_totals (chunks, length)
    SELECT count(*), coalesce(sum(tsvector_length(tsv)), 0) FROM added HAVING count(*) > 0;
    PERFORM bm25_fold_totals();
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION bm25_chunks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM chunk_terms t USING removed o, unnest(o.tsv) u WHERE t.term = u.lexeme AND t.chunk_id = o.id;
    INSERT INTO bm25_totals (chunks, length)
    SELECT -count(*), -coalesce(sum(tsvector_length(tsv)), 0) FROM removed HAVING count(*) > 0;
    PERFORM bm25_fold_totals();
    RETURN NULL;
END
$$;

-- Only rows whose text (tsv) changed are re-indexed: re-embedding touches every row but no text.
CREATE OR REPLACE FUNCTION bm25_chunks_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM chunk_terms t USING before_rows o, after_rows n, unnest(o.tsv) u
    WHERE n.id = o.id AND (o.tsv IS DISTINCT FROM n.tsv OR o.source_id IS DISTINCT FROM n.source_id)
      AND t.term = u.lexeme AND t.chunk_id = o.id;
    INSERT INTO chunk_terms (term, chunk_id, source_id, tf, dl)
    SELECT u.lexeme, n.id, n.source_id, coalesce(array_length(u.positions, 1), 1), tsvector_length(n.tsv)
    FROM after_rows n JOIN before_rows o ON o.id = n.id, unnest(n.tsv) u
    WHERE o.tsv IS DISTINCT FROM n.tsv OR o.source_id IS DISTINCT FROM n.source_id;
    INSERT INTO bm25_totals (chunks, length)
    SELECT 0, sum(tsvector_length(n.tsv) - tsvector_length(o.tsv))
    FROM after_rows n JOIN before_rows o ON o.id = n.id WHERE o.tsv IS DISTINCT FROM n.tsv HAVING count(*) > 0;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS chunks_bm25_insert ON chunks;
CREATE TRIGGER chunks_bm25_insert AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION bm25_chunks_inserted();
DROP TRIGGER IF EXISTS chunks_bm25_delete ON chunks;
CREATE TRIGGER chunks_bm25_delete AFTER DELETE ON chunks
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION bm25_chunks_deleted();
DROP TRIGGER IF EXISTS chunks_bm25_update ON chunks;
CREATE TRIGGER chunks_bm25_update AFTER UPDATE ON chunks
    REFERENCING OLD TABLE AS before_rows NEW TABLE AS after_rows FOR EACH STATEMENT
    EXECUTE FUNCTION bm25_chunks_updated();

-- Index what is already stored.
INSERT INTO chunk_terms (term, chunk_id, source_id, tf, dl)
SELECT u.lexeme, c.id, c.source_id, coalesce(array_length(u.positions, 1), 1), tsvector_length(c.tsv)
FROM chunks c, unnest(c.tsv) u
ON CONFLICT DO NOTHING;
INSERT INTO bm25_totals (chunks, length)
SELECT count(*), coalesce(sum(tsvector_length(tsv)), 0) FROM chunks;
