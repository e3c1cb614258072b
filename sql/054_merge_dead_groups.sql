-- A merge that stays linear when a whole source goes (issue 36): as sql/048's bm25_merge, with the blocks
-- holding a dead posting found without pairing each block with every dead posting of its term.
--
-- Re-syncing a code source as a new one deletes a source whose postings all sit in blocks (each a
-- term_dead row) and writes a new one (each posting a term_delta row). sql/048 found the blocks to
-- rewrite by joining the dead postings' (term, source) groups to their blocks and unnesting each block
-- there; the planner joined the dead rows to the blocks on the term alone before the unnest (it guesses
-- 10 elements an array), so a term with P dead postings in P/128 blocks cost P * P/128 pairs of 128
-- comparisons: 56 M rows filtered for 235,564 dead postings, and over 8 minutes for the 2.15 M of the
-- whole standard library. Now:
-- * a (term, source) whose blocks hold no live posting (the dead rows count all the blocks hold: each
--   dead row names a posting in a block, the key (term, seq) makes them distinct) loses its blocks whole,
--   unread; a deleted source's blocks all go this way;
-- * the other groups' blocks are unnested in a subquery's select list (never flattened) and joined to the
--   dead rows on (term, seq): linear however the planner guesses the arrays' lengths;
-- * a new posting looks for its block only in the (term, source) groups that have blocks left (a new
--   source's postings skip the two index probes each).
-- The postings are the same as sql/048's merge leaves; a group that lost all its postings and gains new
-- ones has them cut into blocks afresh, as a rebuild cuts them (tests/search/test_merge_dead_groups.py).

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
    ANALYZE bm25_dead;
    -- each (term, source) with dead postings: how many, and how many its blocks hold (an index-only
    -- probe a group)
    CREATE TEMP TABLE bm25_groups ON COMMIT DROP AS
        SELECT k.term, k.source_id, k.dead,
               (SELECT coalesce(sum(b.n), 0) FROM term_blocks b WHERE b.term = k.term AND b.source_id = k.source_id) AS held
        FROM (SELECT term, source_id, count(*) AS dead FROM bm25_dead GROUP BY term, source_id) k;
    ANALYZE bm25_groups;  -- a work table's size guessed from its pages could send a few groups to a scan of every block
    -- groups left without a live posting: their blocks go unread
    DELETE FROM term_blocks b USING bm25_groups g
    WHERE g.dead >= g.held AND b.term = g.term AND b.source_id = g.source_id;
    -- a new posting goes to the block of its term and source whose lowest impact is the highest at or
    -- below its own (else the lowest block); only groups with blocks are looked up
    ANALYZE bm25_add;
    CREATE TEMP TABLE bm25_targets ON COMMIT DROP AS
        SELECT k.term, k.source_id FROM (SELECT DISTINCT term, source_id FROM bm25_add) k
        WHERE EXISTS (SELECT 1 FROM term_blocks b WHERE b.term = k.term AND b.source_id = k.source_id);
    UPDATE bm25_add a SET blk = coalesce(
        (SELECT b.ctid FROM term_blocks b WHERE b.term = a.term AND b.source_id = a.source_id AND b.impact_min <= a.impact
         ORDER BY b.impact_min DESC LIMIT 1),
        (SELECT b.ctid FROM term_blocks b WHERE b.term = a.term AND b.source_id = a.source_id
         ORDER BY b.impact_min LIMIT 1))
    FROM bm25_targets t WHERE t.term = a.term AND t.source_id = a.source_id;
    CREATE TEMP TABLE bm25_blocks ON COMMIT DROP AS
        SELECT blk FROM bm25_add WHERE blk IS NOT NULL
        UNION
        -- the other groups' blocks, each unnested once in a subquery's select list (which the planner
        -- never flattens, so the dead rows are joined to the unnested postings on (term, seq), never to
        -- the blocks on the term alone)
        SELECT h.blk
        FROM (SELECT b.ctid AS blk, b.term, unnest(b.seqs) AS seq
              FROM bm25_groups g JOIN term_blocks b ON b.term = g.term AND b.source_id = g.source_id
              WHERE g.dead < g.held) h
        JOIN bm25_dead d ON d.term = h.term AND d.seq = h.seq;
    CREATE TEMP TABLE bm25_pack ON COMMIT DROP AS
        SELECT b.term, b.source_id, b.ctid::text AS grp, u.seq, coalesce(u.tf, 1::smallint) AS tf, u.impact
        FROM term_blocks b CROSS JOIN LATERAL unnest(b.seqs, b.tfs, b.impacts) AS u(seq, tf, impact)
        WHERE b.ctid = ANY(ARRAY(SELECT blk FROM bm25_blocks))
          AND NOT EXISTS (SELECT 1 FROM bm25_dead d WHERE d.term = b.term AND d.seq = u.seq)
        UNION ALL
        SELECT term, source_id, coalesce(blk::text, ''), seq, tf, impact FROM bm25_add;
    DELETE FROM term_blocks WHERE ctid = ANY(ARRAY(SELECT blk FROM bm25_blocks));
    PERFORM bm25_write_blocks(block_size);
    -- a second merge in this transaction
    DROP TABLE bm25_seqs, bm25_add, bm25_dead, bm25_groups, bm25_targets, bm25_blocks, bm25_pack;
    RETURN folded + dead;
END
$$;
