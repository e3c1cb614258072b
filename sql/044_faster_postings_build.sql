-- Faster BM25 postings build (issue 37): the same postings as sql/042, written in less time; no data changes.
--
-- * archivist_chunk_names runs the name extractor (sql/030 archivist_name_terms: a regexp_matches and
--   three grouping steps, a plan per call) only on text that can hold a name: a dotted or namespaced
--   name has a letter, digit or underscore right before a `.` or `::` that a letter or underscore
--   follows; a snake_case name has an underscore. Text with neither gets no names, as before. Prose
--   mostly has neither: at 100,000 SciFact chunks 3,716 hold a name, and the names took ~31 s of an
--   ~88 s rebuild, the test ~1 s (measured on a loaded machine).
-- * bm25_write_blocks sorts the postings by term in the "C" collation (byte order: abbreviated keys,
--   no strcoll); the blocks are the same, whatever order their rows are written in.

CREATE OR REPLACE FUNCTION archivist_chunk_names(body text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN strpos(body, '_') > 0 OR body ~ '[[:alnum:]_](\.|::)[[:alpha:]_]'
                THEN archivist_name_terms('{fts_config}'::regconfig, body)
                ELSE ''::tsvector END
$$;

CREATE OR REPLACE FUNCTION bm25_write_blocks(block_size integer) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    written bigint;
BEGIN
    INSERT INTO term_blocks (term, source_id, impact_max, impact_min, n, seqs, tfs, impacts)
    SELECT term, source_id, max(impact), min(impact), count(*)::integer,
           array_agg(seq ORDER BY impact DESC, seq), array_agg(tf ORDER BY impact DESC, seq),
           array_agg(impact ORDER BY impact DESC, seq)
    FROM (
        SELECT p.*, (rn - 1) * ((cnt + block_size - 1) / block_size) / cnt AS part
        FROM (
            SELECT p.*, row_number() OVER w AS rn, count(*) OVER (PARTITION BY term, source_id, grp) AS cnt
            FROM (SELECT term COLLATE "C" AS term, source_id, grp, seq, tf, impact FROM bm25_pack) p
            WINDOW w AS (PARTITION BY term, source_id, grp ORDER BY impact DESC, seq)
        ) p
    ) p
    GROUP BY term, source_id, grp, part;
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN written;
END
$$;
