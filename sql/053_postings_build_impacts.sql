-- Cheaper BM25 postings rebuild (issue 37, build time): the same blocks as sql/052, in less CPU; no data changes.
--
-- * A posting's impact, bm25_impact(tf, dl, avgdl), was computed per posting (64.5 M calls at a million
--   chunks); its numeric constants make each call ~1 µs (numeric arithmetic and conversions to float8):
--   at 200,000 chunks ~10 of the rebuild's ~110-150 CPU seconds. It depends on tf and dl alone (avgdl is
--   one value in a rebuild), chunk lengths take a few hundred values and tf is mostly 1: so the rebuild
--   computes it once per distinct dl for tf up to 64 (bm25_rebuild_impacts) and reads that array; a
--   higher tf still calls bm25_impact. The same function on the same arguments: the same real, bit for bit.
-- * That lookup is a hash join on chunk_seqs (one row per chunk, ~110 MB at a million): the part runs with
--   hash_mem_multiplier 64 (up to 256 MB of hash at the default work_mem) so it is not split into batches
--   that write the chunks' rows to temporary files.
-- * bm25_rebuild_seqs_part computes each chunk's length before numbering the chunks, so the sort by
--   ctid carries lengths instead of tsvectors.
-- * chunk_seqs is analyzed once numbered, so the blocks' join is planned from its real size.

-- Per distinct chunk length in chunk_seqs: the impacts of tf 1 .. 64 at `avgdl` (element tf). PARALLEL SAFE:
-- the part's query may still run with a parallel worker, as before.
CREATE OR REPLACE FUNCTION bm25_rebuild_impacts(avgdl float8)
RETURNS TABLE (dl integer, impacts real[]) LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT d.dl, ARRAY(SELECT bm25_impact(t, d.dl, avgdl) FROM generate_series(1, 64) t)
    FROM (SELECT DISTINCT s.dl FROM chunk_seqs s) d
$$;

CREATE OR REPLACE FUNCTION bm25_rebuild_seqs_part(first_page bigint, end_page bigint, first_seq integer)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO chunk_seqs (seq, chunk_id, source_id, dl, names, merged)
    SELECT first_seq + row_number() OVER (ORDER BY ctid) - 1, id, source_id, dl, names, true
    FROM (SELECT ctid, id, source_id, tsvector_length(tsv || coalesce(names, ''::tsvector)) AS dl, names
          FROM (SELECT ctid, id, source_id, tsv,
                       nullif(archivist_chunk_names(context || ' ' || text), ''::tsvector) AS names
                FROM chunks
                WHERE ctid >= format('(%s,0)', first_page)::tid AND ctid < format('(%s,0)', end_page)::tid
                OFFSET 0) n
          OFFSET 0) c;
$$;

CREATE OR REPLACE FUNCTION bm25_rebuild_totals() RETURNS float8 LANGUAGE plpgsql AS $$
BEGIN
    PERFORM setval(pg_get_serial_sequence('chunk_seqs', 'seq'), coalesce(max(seq), 0) + 1, false) FROM chunk_seqs;
    INSERT INTO bm25_totals (chunks, length) SELECT count(*), coalesce(sum(dl), 0) FROM chunk_seqs;
    ANALYZE chunk_seqs;
    RETURN bm25_avgdl();
END
$$;

-- As sql/052, with the impacts read from bm25_rebuild_impacts (materialised once: OFFSET 0).
CREATE OR REPLACE FUNCTION bm25_rebuild_part(block_size integer, avgdl float8, part integer, parts integer)
RETURNS bigint LANGUAGE plpgsql SET hash_mem_multiplier = 64 AS $$
DECLARE
    blocks bigint;
BEGIN
    EXECUTE format($view$
        CREATE TEMP VIEW bm25_pack AS
        SELECT u.lexeme AS term, s.source_id, ''::text AS grp, s.seq, f.tf::smallint AS tf,
               CASE WHEN f.tf <= 64 THEN i.impacts[f.tf] ELSE bm25_impact(f.tf, s.dl, %1$L::float8) END AS impact
        FROM chunk_seqs s
             JOIN (SELECT * FROM bm25_rebuild_impacts(%1$L::float8) OFFSET 0) i ON i.dl = s.dl
             JOIN chunks c ON c.id = s.chunk_id, unnest(c.tsv || coalesce(s.names, ''::tsvector)) u,
             LATERAL (SELECT coalesce(array_length(u.positions, 1), 1) AS tf) f
        WHERE %2$s
    $view$, avgdl, CASE WHEN parts = 1 THEN 'true' ELSE format('bm25_term_part(u.lexeme, %s) = %s', parts, part) END);
    blocks := bm25_write_blocks(block_size);
    DROP VIEW bm25_pack;
    RETURN blocks;
END
$$;
