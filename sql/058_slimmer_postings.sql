-- Slimmer BM25 postings (issue 37, size): a block whose postings share one impact stores no impacts, and a
-- rebuild writes chunk_seqs' B-trees after its rows; rankings unchanged.
--
-- * A block's impacts are NULL when its highest and lowest impact are equal: every posting then has
--   impact_max (bm25_block_impacts spells them out for whatever reads them). A block of one posting is
--   always such a block, and rare terms make many: at 100,000 SciFact chunks (10 sources) 43% of the
--   blocks, ~4.6 MB of impacts arrays (25 bytes each: a one-element array is mostly its header). The
--   blocks written before this migration keep their impacts and read the same: merges rewrite the blocks
--   they touch, and a rebuild all of them, in the short form (as sql/048 did for tfs).
-- * A rebuild drops chunk_seqs' primary key and chunk_id key with its rows and adds them back once the
--   rows are in (bm25_index_seqs, from bm25_rebuild_totals): one sort each, packed B-trees, instead of
--   a million inserts into each, half of them into pages split by the other parts' inserts (at a
--   million chunks 30 + 40 MB as built by two parts, ~22 + ~31 MB packed). The primary key (seqs only
--   ever grow) and the blocks' index (rewritten only by merges) are built with full leaf pages.

ALTER TABLE term_blocks ALTER COLUMN impacts DROP NOT NULL;

-- A block's impact per posting, in its order: the stored array, or impact_max n times.
CREATE OR REPLACE FUNCTION bm25_block_impacts(impacts real[], impact_max real, n integer) RETURNS real[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(impacts, array_fill(impact_max, ARRAY[n]))
$$;

-- As sql/048, with NULL impacts when they are all one.
CREATE OR REPLACE FUNCTION bm25_write_blocks(block_size integer) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    written bigint;
BEGIN
    INSERT INTO term_blocks (term, source_id, impact_max, impact_min, n, seqs, tfs, impacts)
    SELECT term, source_id, max(impact), min(impact), count(*)::integer,
           array_agg(seq ORDER BY impact DESC, seq),
           -- up to the block's last tf above 1 (rn orders the block as the arrays are); NULL if none
           (array_agg(tf ORDER BY impact DESC, seq))[1:max(rn) FILTER (WHERE tf <> 1) - min(rn) + 1],
           CASE WHEN max(impact) <> min(impact) THEN array_agg(impact ORDER BY impact DESC, seq) END
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

-- As sql/048, with a block's impacts through bm25_block_impacts.
CREATE OR REPLACE FUNCTION bm25_postings(q_term text, sources uuid[], k integer)
RETURNS TABLE (seq integer, tf integer, impact real) LANGUAGE sql STABLE AS $$
    SELECT u.seq, coalesce(u.tf, 1)::integer, u.impact
    FROM (
        SELECT th.v, unnest(b.seqs) AS seq, unnest(b.tfs) AS tf,
               unnest(bm25_block_impacts(b.impacts, b.impact_max, b.n)) AS impact
        FROM (SELECT bm25_theta(q_term, sources, k) AS v OFFSET 0) th  -- OFFSET 0: computed once per term
        JOIN term_blocks b
          ON b.term = q_term AND (sources IS NULL OR b.source_id = ANY(sources)) AND b.impact_max >= th.v
    ) u
    WHERE u.impact >= u.v AND NOT EXISTS (SELECT 1 FROM term_dead d WHERE d.term = q_term AND d.seq = u.seq)
    UNION ALL
    SELECT d.seq, d.tf::integer, d.impact FROM term_delta d
    WHERE d.term = q_term AND (sources IS NULL OR d.source_id = ANY(sources))
$$;

CREATE OR REPLACE VIEW chunk_postings AS
SELECT p.term, s.chunk_id, p.source_id, p.tf, s.dl, p.impact
FROM (
    SELECT b.term, b.source_id, u.seq, coalesce(u.tf, 1)::integer AS tf, u.impact
    FROM term_blocks b
         CROSS JOIN LATERAL unnest(b.seqs, b.tfs, bm25_block_impacts(b.impacts, b.impact_max, b.n)) AS u(seq, tf, impact)
    WHERE NOT EXISTS (SELECT 1 FROM term_dead d WHERE d.term = b.term AND d.seq = u.seq)
    UNION ALL
    SELECT d.term, d.source_id, d.seq, d.tf::integer, d.impact FROM term_delta d
) p
JOIN chunk_seqs s ON s.seq = p.seq;

-- chunk_seqs' keys, added back after a rebuild wrote its rows (no-ops when they are there).
CREATE OR REPLACE FUNCTION bm25_index_seqs() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'chunk_seqs_pkey' AND conrelid = 'chunk_seqs'::regclass) THEN
        ALTER TABLE chunk_seqs ADD CONSTRAINT chunk_seqs_pkey PRIMARY KEY (seq) WITH (fillfactor = 100);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'chunk_seqs_chunk_id_key' AND conrelid = 'chunk_seqs'::regclass) THEN
        ALTER TABLE chunk_seqs ADD CONSTRAINT chunk_seqs_chunk_id_key UNIQUE (chunk_id);
    END IF;
END
$$;

-- The blocks' index, full pages (sql/052 left B-tree leaves 10% free for inserts; blocks change only in
-- merges, which write few rows).
CREATE OR REPLACE FUNCTION bm25_index_blocks() RETURNS void LANGUAGE sql AS $$
    CREATE INDEX term_blocks_term_idx ON term_blocks (term, source_id, impact_min DESC) INCLUDE (impact_max, n)
    WITH (fillfactor = 100);
$$;

-- As sql/052, with chunk_seqs' keys dropped too (bm25_index_seqs adds them back).
CREATE OR REPLACE FUNCTION bm25_rebuild_clear() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE chunk_seqs, term_blocks, term_delta, term_dead, bm25_totals RESTART IDENTITY;
    DROP INDEX IF EXISTS term_blocks_term_idx;
    ALTER TABLE chunk_seqs DROP CONSTRAINT IF EXISTS chunk_seqs_pkey, DROP CONSTRAINT IF EXISTS chunk_seqs_chunk_id_key;
END
$$;

-- As sql/053, with chunk_seqs' keys built once its rows are in.
CREATE OR REPLACE FUNCTION bm25_rebuild_totals() RETURNS float8 LANGUAGE plpgsql AS $$
BEGIN
    PERFORM bm25_index_seqs();
    PERFORM setval(pg_get_serial_sequence('chunk_seqs', 'seq'), coalesce(max(seq), 0) + 1, false) FROM chunk_seqs;
    INSERT INTO bm25_totals (chunks, length) SELECT count(*), coalesce(sum(dl), 0) FROM chunk_seqs;
    ANALYZE chunk_seqs;
    RETURN bm25_avgdl();
END
$$;

-- As sql/054, with a block's impacts through bm25_block_impacts.
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
        FROM term_blocks b
             CROSS JOIN LATERAL unnest(b.seqs, b.tfs, bm25_block_impacts(b.impacts, b.impact_max, b.n)) AS u(seq, tf, impact)
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
