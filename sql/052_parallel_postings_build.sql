-- The BM25 postings rebuild in parts that several connections can run at once (issue 37, build time); no data changes.
--
-- A term's blocks depend only on that term's postings, so the terms can be split among backends, each
-- writing the blocks of its own terms (bm25_term_part: a hash of the term, modulo the parts) from the
-- same chunk_seqs: the blocks are byte-identical to one backend writing them all.
-- chunk_seqs is split the same way by ranges of the chunks' heap pages, each range numbering its chunks
-- from the count of the ranges before it: the seqs one scan of chunks gives them.
-- services/search/bm25_index.py `rebuild_parallel` runs the parts on `parts` connections;
-- bm25_rebuild (the conversion of sql/042, and the one-connection rebuild) runs the same steps in one
-- transaction, as before.

CREATE OR REPLACE FUNCTION bm25_term_part(term text, parts integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (hashtext(term) & 2147483647) % parts
$$;

-- Empties the postings and drops their term index, for the steps below.
CREATE OR REPLACE FUNCTION bm25_rebuild_clear() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE chunk_seqs, term_blocks, term_delta, term_dead, bm25_totals RESTART IDENTITY;
    DROP INDEX IF EXISTS term_blocks_term_idx;
END
$$;

-- The chunks in heap pages [first_page, end_page), counted, and given their chunk_seqs rows (as sql/044):
-- seqs from first_seq on in the chunks' physical order, the order one scan of the table numbers them in
-- (so parts numbered from the counts of the parts before them number every chunk as one scan does).
CREATE OR REPLACE FUNCTION bm25_chunks_in_pages(first_page bigint, end_page bigint) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM chunks
    WHERE ctid >= format('(%s,0)', first_page)::tid AND ctid < format('(%s,0)', end_page)::tid
$$;

CREATE OR REPLACE FUNCTION bm25_rebuild_seqs_part(first_page bigint, end_page bigint, first_seq integer)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO chunk_seqs (seq, chunk_id, source_id, dl, names, merged)
    SELECT first_seq + row_number() OVER (ORDER BY ctid) - 1,
           id, source_id, tsvector_length(tsv || coalesce(names, ''::tsvector)), names, true
    FROM (SELECT ctid, id, source_id, tsv, nullif(archivist_chunk_names(context || ' ' || text), ''::tsvector) AS names
          FROM chunks
          WHERE ctid >= format('(%s,0)', first_page)::tid AND ctid < format('(%s,0)', end_page)::tid
          OFFSET 0) c;
$$;

-- After the seqs: the identity continues past them, the totals; returns the average chunk length the
-- impacts are computed with.
CREATE OR REPLACE FUNCTION bm25_rebuild_totals() RETURNS float8 LANGUAGE plpgsql AS $$
BEGIN
    PERFORM setval(pg_get_serial_sequence('chunk_seqs', 'seq'), coalesce(max(seq), 0) + 1, false) FROM chunk_seqs;
    INSERT INTO bm25_totals (chunks, length) SELECT count(*), coalesce(sum(dl), 0) FROM chunk_seqs;
    RETURN bm25_avgdl();
END
$$;

-- Beyond the last page of chunks (the caller keeps chunks from growing).
CREATE OR REPLACE FUNCTION bm25_chunk_pages_end() RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT pg_relation_size('chunks') / current_setting('block_size')::bigint + 1
$$;

-- The whole of chunk_seqs and bm25_totals in one backend; returns the average chunk length.
CREATE OR REPLACE FUNCTION bm25_rebuild_seqs() RETURNS float8 LANGUAGE plpgsql AS $$
BEGIN
    PERFORM bm25_rebuild_clear();
    PERFORM bm25_rebuild_seqs_part(0, bm25_chunk_pages_end(), 1);
    RETURN bm25_rebuild_totals();
END
$$;

-- Writes the blocks of the terms in `part` (of `parts`; all of them when parts = 1) from chunk_seqs.
-- bm25_pack is a view (sql/044): avgdl and the part are written into it as literals.
CREATE OR REPLACE FUNCTION bm25_rebuild_part(block_size integer, avgdl float8, part integer, parts integer)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    blocks bigint;
BEGIN
    EXECUTE format($view$
        CREATE TEMP VIEW bm25_pack AS
        SELECT u.lexeme AS term, s.source_id, ''::text AS grp, s.seq, f.tf::smallint AS tf,
               bm25_impact(f.tf, s.dl, %L::float8) AS impact
        FROM chunk_seqs s JOIN chunks c ON c.id = s.chunk_id, unnest(c.tsv || coalesce(s.names, ''::tsvector)) u,
             LATERAL (SELECT coalesce(array_length(u.positions, 1), 1) AS tf) f
        WHERE %s
    $view$, avgdl, CASE WHEN parts = 1 THEN 'true' ELSE format('bm25_term_part(u.lexeme, %s) = %s', parts, part) END);
    blocks := bm25_write_blocks(block_size);
    DROP VIEW bm25_pack;
    RETURN blocks;
END
$$;

CREATE OR REPLACE FUNCTION bm25_index_blocks() RETURNS void LANGUAGE sql AS $$
    CREATE INDEX term_blocks_term_idx ON term_blocks (term, source_id, impact_min DESC) INCLUDE (impact_max, n);
$$;

-- As sql/044, in the three steps above.
CREATE OR REPLACE FUNCTION bm25_rebuild(block_size integer DEFAULT 128) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    blocks bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(1112354102);  -- no merge meanwhile
    blocks := bm25_rebuild_part(block_size, bm25_rebuild_seqs(), 0, 1);
    PERFORM bm25_index_blocks();
    RETURN blocks;
END
$$;
