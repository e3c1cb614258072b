-- Slimmer BM25 blocks (issue 37, size): a block's tfs stop at its last tf above 1; rankings unchanged.
--
-- A posting past the end of its block's tfs has tf 1, and a block whose tfs are all 1 stores NULL.
-- Most postings have tf 1, and a block lists its postings by impact, which falls as tf does, so the
-- ones gather at the end: at 100,000 SciFact chunks 72% of the tf entries go, and the whole array (with
-- its 24-byte header) from 61% of the blocks; term_blocks 116 -> 102 MB. Everything that reads tfs pads
-- them with 1 (coalesce), so blocks written before this migration, with every tf, read the same: no
-- block is rewritten here (a conversion of minutes per million chunks for ~10% of the postings'
-- size); merges rewrite the blocks they touch, and a rebuild all of them, in the short form.

ALTER TABLE term_blocks ALTER COLUMN tfs DROP NOT NULL;

CREATE OR REPLACE FUNCTION bm25_write_blocks(block_size integer) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    written bigint;
BEGIN
    INSERT INTO term_blocks (term, source_id, impact_max, impact_min, n, seqs, tfs, impacts)
    SELECT term, source_id, max(impact), min(impact), count(*)::integer,
           array_agg(seq ORDER BY impact DESC, seq),
           -- up to the block's last tf above 1 (rn orders the block as the arrays are); NULL if none
           (array_agg(tf ORDER BY impact DESC, seq))[1:max(rn) FILTER (WHERE tf <> 1) - min(rn) + 1],
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

-- As sql/042, with tf 1 past the end of a block's tfs.
CREATE OR REPLACE FUNCTION bm25_postings(q_term text, sources uuid[], k integer)
RETURNS TABLE (seq integer, tf integer, impact real) LANGUAGE sql STABLE AS $$
    SELECT u.seq, coalesce(u.tf, 1)::integer, u.impact
    FROM (
        SELECT th.v, unnest(b.seqs) AS seq, unnest(b.tfs) AS tf, unnest(b.impacts) AS impact
        FROM (SELECT bm25_theta(q_term, sources, k) AS v OFFSET 0) th  -- OFFSET 0: computed once per term
        JOIN term_blocks b
          ON b.term = q_term AND (sources IS NULL OR b.source_id = ANY(sources)) AND b.impact_max >= th.v
    ) u
    WHERE u.impact >= u.v AND NOT EXISTS (SELECT 1 FROM term_dead d WHERE d.term = q_term AND d.seq = u.seq)
    UNION ALL
    SELECT d.seq, d.tf::integer, d.impact FROM term_delta d
    WHERE d.term = q_term AND (sources IS NULL OR d.source_id = ANY(sources))
$$;

-- As sql/042, with tf 1 past the end of a block's tfs.
CREATE OR REPLACE FUNCTION bm25_merge(block_size integer DEFAULT 128) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    folded bigint;
    dead bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(1112354102) THEN
        RETURN -1;
    END IF;
    CREATE TEMP TABLE bm25_seqs (seq integer) ON COMMIT DROP;
    WITH s AS (UPDATE chunk_seqs SET merged = true WHERE NOT merged RETURNING seq)
    INSERT INTO bm25_seqs SELECT seq FROM s;
    CREATE TEMP TABLE bm25_add (term text, source_id uuid, seq integer, tf smallint, impact real, blk tid) ON COMMIT DROP;
    WITH d AS (DELETE FROM term_delta t WHERE t.seq IN (SELECT seq FROM bm25_seqs) RETURNING t.*)
    INSERT INTO bm25_add SELECT term, source_id, seq, tf, impact FROM d;
    GET DIAGNOSTICS folded = ROW_COUNT;
    CREATE TEMP TABLE bm25_dead (term text, source_id uuid, seq integer) ON COMMIT DROP;
    WITH d AS (DELETE FROM term_dead RETURNING term, source_id, seq)
    INSERT INTO bm25_dead SELECT * FROM d;
    GET DIAGNOSTICS dead = ROW_COUNT;
    IF folded = 0 AND dead = 0 THEN
        DROP TABLE bm25_seqs, bm25_add, bm25_dead;
        RETURN 0;
    END IF;
    UPDATE bm25_add a SET blk = coalesce(
        (SELECT b.ctid FROM term_blocks b WHERE b.term = a.term AND b.source_id = a.source_id AND b.impact_min <= a.impact
         ORDER BY b.impact_min DESC LIMIT 1),
        (SELECT b.ctid FROM term_blocks b WHERE b.term = a.term AND b.source_id = a.source_id
         ORDER BY b.impact_min LIMIT 1));
    ANALYZE bm25_dead;
    -- the blocks holding a dead posting: each list with dead postings unnested once, joined on (term, seq)
    -- (linear in those lists, also when a whole source goes)
    CREATE TEMP TABLE bm25_blocks ON COMMIT DROP AS
        SELECT blk FROM bm25_add WHERE blk IS NOT NULL
        UNION
        SELECT b.ctid
        FROM (SELECT DISTINCT term, source_id FROM bm25_dead) k
        JOIN term_blocks b ON b.term = k.term AND b.source_id = k.source_id
        CROSS JOIN LATERAL (SELECT unnest(b.seqs) AS seq) s
        JOIN bm25_dead d ON d.term = b.term AND d.seq = s.seq;
    CREATE TEMP TABLE bm25_pack ON COMMIT DROP AS
        SELECT b.term, b.source_id, b.ctid::text AS grp, u.seq, coalesce(u.tf, 1::smallint) AS tf, u.impact
        FROM term_blocks b CROSS JOIN LATERAL unnest(b.seqs, b.tfs, b.impacts) AS u(seq, tf, impact)
        WHERE b.ctid = ANY(ARRAY(SELECT blk FROM bm25_blocks))
          AND NOT EXISTS (SELECT 1 FROM bm25_dead d WHERE d.term = b.term AND d.seq = u.seq)
        UNION ALL
        SELECT term, source_id, coalesce(blk::text, ''), seq, tf, impact FROM bm25_add;
    DELETE FROM term_blocks WHERE ctid = ANY(ARRAY(SELECT blk FROM bm25_blocks));
    PERFORM bm25_write_blocks(block_size);
    DROP TABLE bm25_seqs, bm25_add, bm25_dead, bm25_blocks, bm25_pack;  -- a second merge in this transaction
    RETURN folded + dead;
END
$$;

CREATE OR REPLACE VIEW chunk_postings AS
SELECT p.term, s.chunk_id, p.source_id, p.tf, s.dl, p.impact
FROM (
    SELECT b.term, b.source_id, u.seq, coalesce(u.tf, 1)::integer AS tf, u.impact
    FROM term_blocks b CROSS JOIN LATERAL unnest(b.seqs, b.tfs, b.impacts) AS u(seq, tf, impact)
    WHERE NOT EXISTS (SELECT 1 FROM term_dead d WHERE d.term = b.term AND d.seq = u.seq)
    UNION ALL
    SELECT d.term, d.source_id, d.seq, d.tf::integer, d.impact FROM term_delta d
) p
JOIN chunk_seqs s ON s.seq = p.seq;
