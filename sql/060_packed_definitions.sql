-- Packed definitions (issue 36, storage): a code file's definitions are arrays in its code_symbol_files row
-- A row per definition cost ~100 bytes before its data (tuple header and line pointer, two uuids, an entry
-- in each of two indexes): 15.6 of the whole Python standard library's 61.4 MB of code navigation for its
-- 75,718 definitions. Now a file's definitions are arrays in the row the file already has, in file order
-- (element i of each array is definition i); the arrays are compressed in the row (storage MAIN: a row
-- over ~2 KB has its arrays compressed, and stays in the table unless it is still over a page). A GIN
-- finds the files defining a name by a 4-byte hash of each name (hashtext: a GIN built in one pass fills
-- its entry pages half, so a key costs twice its size; 4.0 MB by the names themselves, 2.7 MB hashed);
-- a reader checks the name itself (services/code/symbol_search.py). code_symbols keeps the names API
-- reference pages document (`anchor` set), which are few. Converts in place: every code file's rows
-- become its arrays, then go (the whole stdlib: code_symbols 15.6 + code_symbol_files 0.5 MB -> 7.4 MB).

ALTER TABLE code_symbol_files
    ADD COLUMN IF NOT EXISTS names text[],  -- NULL: no definitions
    ADD COLUMN IF NOT EXISTS kinds text[],
    ADD COLUMN IF NOT EXISTS parents text[],
    -- NULL elements where parent and name spell it (code_qualified_name, sql/055); NULL when all are
    ADD COLUMN IF NOT EXISTS qualified_names text[],
    ADD COLUMN IF NOT EXISTS line_starts integer[],
    ADD COLUMN IF NOT EXISTS line_ends integer[],
    ADD COLUMN IF NOT EXISTS signatures text[],
    ADD COLUMN IF NOT EXISTS docs text[];

ALTER TABLE code_symbol_files
    ALTER COLUMN names SET STORAGE MAIN, ALTER COLUMN kinds SET STORAGE MAIN,
    ALTER COLUMN parents SET STORAGE MAIN, ALTER COLUMN qualified_names SET STORAGE MAIN,
    ALTER COLUMN line_starts SET STORAGE MAIN, ALTER COLUMN line_ends SET STORAGE MAIN,
    ALTER COLUMN signatures SET STORAGE MAIN, ALTER COLUMN docs SET STORAGE MAIN;
-- once a row is over ~2 KB (when the toaster runs at all), every array that compresses is compressed,
-- not only the largest until the row fits
ALTER TABLE code_symbol_files SET (toast_tuple_target = 128);

-- The GIN keys of a file's names: their hashes (a reader rechecks the name: hashes may collide).
CREATE OR REPLACE FUNCTION code_name_keys(names text[]) RETURNS integer[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT ARRAY(SELECT hashtext(n) FROM unnest(names) AS n)
$$;
-- so the planner answers `code_name_keys(names) @> ...` from the index, never row by row
ALTER FUNCTION code_name_keys(text[]) COST 1000;

UPDATE code_symbol_files f
SET names = d.names, kinds = d.kinds, parents = d.parents, qualified_names = d.qualified_names,
    line_starts = d.line_starts, line_ends = d.line_ends, signatures = d.signatures, docs = d.docs
FROM (
    SELECT document_id,
           array_agg(name ORDER BY line_start, line_end DESC, ctid) AS names,
           array_agg(kind ORDER BY line_start, line_end DESC, ctid) AS kinds,
           array_agg(parent ORDER BY line_start, line_end DESC, ctid) AS parents,
           CASE WHEN count(qualified_name) > 0  -- NULL when every one is spelled by parent and name
                THEN array_agg(qualified_name ORDER BY line_start, line_end DESC, ctid) END AS qualified_names,
           array_agg(line_start ORDER BY line_start, line_end DESC, ctid) AS line_starts,
           array_agg(line_end ORDER BY line_start, line_end DESC, ctid) AS line_ends,
           array_agg(signature ORDER BY line_start, line_end DESC, ctid) AS signatures,
           array_agg(doc ORDER BY line_start, line_end DESC, ctid) AS docs
    FROM code_symbols WHERE anchor IS NULL GROUP BY document_id
) d
WHERE d.document_id = f.document_id;

-- definitions of a document without a code_symbol_files row (none are written so) have no reader: they go too
DELETE FROM code_symbols WHERE anchor IS NULL;
-- what is left is the few documented names: their indexes rebuilt small (the heap's emptied pages are
-- vacuumed away; a VACUUM FULL code_symbols gives them back at once)
REINDEX INDEX code_symbols_name_idx;
REINDEX INDEX code_symbols_document_idx;

CREATE INDEX IF NOT EXISTS code_symbol_files_names_idx ON code_symbol_files USING gin (code_name_keys(names));
