-- grep's candidate blocks without reading them (issue 36): a GIN over each block's trigram array
-- (pg_trgm's show_trgm: the trigrams of its words, lowercased) answers `show_trgm(text) @> ARRAY[...]`
-- exactly, so PostgreSQL never detoasts a block to recheck it. The gin_trgm_ops index it replaces answered
-- `text LIKE '%literal%'` only with a recheck of every candidate block (~20-50 us each, decompressing
-- its TOASTed text), which was most of a common pattern's time. The array index is also smaller (words
-- lowercased, no recheck data). Converts in place: the index is built over the existing blocks.
CREATE INDEX IF NOT EXISTS code_blocks_words_idx ON code_blocks USING gin (show_trgm(text));
DROP INDEX IF EXISTS code_blocks_trgm_idx;
-- What show_trgm costs a block (~1 ms for 4 KB): so the planner never evaluates it on rows (a filter
-- that detoasts every block of the table) when the index answers the condition.
ALTER FUNCTION show_trgm(text) COST 10000;
