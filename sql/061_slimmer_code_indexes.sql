-- Slimmer code-navigation indexes (issue 36, storage), converted in place:
--
-- 1. grep's trigram index keeps only the trigrams grep asks for. show_trgm pads each word ("  a", " ab",
--    "ab "), and grep never asks for a padded trigram (the literal's edge may sit inside a longer word of
--    the line) nor for a hashed multibyte one ("0x..."; it may hide such padding): services/code/grep.py.
--    Those were 37% of the index's entries: over the Python standard library 12.8 -> 8.8 MB. The index
--    (same name, so the rebuild chore of services/code/trigram_upkeep.py keeps it) is over code_trigrams,
--    and grep's literals go through the same function, so a block holding a literal holds every trigram
--    asked for (what the index answers is exactly what it answered).
-- 2. A block's text is compressed in its row (storage MAIN) instead of moved to TOAST when still over
--    ~2 KB compressed: no TOAST chunk rows and index for 612 of the stdlib's 8,920 blocks (-0.5 MB). Rows
--    written from now on; the others read the same.
-- 3. The qualified references lose their own names index (2.2 MB): a file's qualified uses are looked up
--    through the files whose references hold the name (code_references' index), so every name of a
--    file's qualified uses must be one of its reference names. Both come from the same identifiers
--    (services/code/symbols.py, qualified.py), the import's name standing for an alias's uses; the write
--    adds any that is not (with no lines: no reference answer changes), and here the rows written before.

-- show_trgm named with pg_trgm's schema: an index build runs its expression under a search_path of
-- pg_catalog only
DO $$
BEGIN
    EXECUTE format(
        'CREATE OR REPLACE FUNCTION code_trigrams(text) RETURNS text[] LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE '
        'AS $f$ SELECT ARRAY(SELECT t FROM unnest(%I.show_trgm($1)) AS t '
        'WHERE t NOT LIKE ''%% %%'' AND t NOT LIKE ''0x%%'') $f$',
        (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'));
END
$$;
-- as show_trgm (sql/046): the planner must never evaluate it over the blocks when the index answers
ALTER FUNCTION code_trigrams(text) COST 10000;

DROP INDEX IF EXISTS code_blocks_words_idx;
CREATE INDEX code_blocks_words_idx ON code_blocks USING gin (code_trigrams(text));
-- the one-pass build just made (services/code/trigram_upkeep.py counts inserts since)
INSERT INTO code_index_builds (index_name, inserted)
SELECT 'code_blocks_words_idx', coalesce((SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = 'code_blocks'::regclass), 0)
ON CONFLICT (index_name) DO UPDATE SET inserted = EXCLUDED.inserted, built_at = now();

ALTER TABLE code_blocks ALTER COLUMN text SET STORAGE MAIN;

-- the qualified uses' names a file's reference row lacks, added with no lines (ends repeat the last end)
WITH missing AS (
    SELECT q.document_id, q.source_id, array_agg(DISTINCT n) AS names
    FROM code_qualified_references q CROSS JOIN LATERAL unnest(q.names) AS n
    LEFT JOIN code_references r ON r.document_id = q.document_id
    WHERE r.document_id IS NULL OR NOT r.names @> ARRAY[n]
    GROUP BY q.document_id, q.source_id
), updated AS (
    UPDATE code_references r
    SET names = r.names || m.names,
        ends = r.ends || array_fill(coalesce(r.ends[cardinality(r.ends)], 0), ARRAY[cardinality(m.names)])
    FROM missing m WHERE m.document_id = r.document_id
    RETURNING r.document_id
)
INSERT INTO code_references (source_id, document_id, names, ends, lines)
SELECT m.source_id, m.document_id, m.names, array_fill(0, ARRAY[cardinality(m.names)]), ARRAY[]::integer[]
FROM missing m WHERE m.document_id NOT IN (SELECT document_id FROM updated);

DROP INDEX IF EXISTS code_qualified_reference_files_names_idx;
