-- Identifiers searchable whole and by part (issue 29): the keyword index and the query are both
-- analysed by archivist_tsvector, which is to_tsvector plus, for each dotted, namespaced or snake_case
-- name in the text (`mock.patch.object`, `tokio::spawn`, `dirs_exist_ok`):
--   * the whole name, lower-cased, unstemmed: 'mock.patch.object' (PostgreSQL's parser keeps only some
--     dotted names whole, as "host" tokens, and splits snake_case and `::` names into words);
--   * each run of 2 to 4 of its segments: 'mock.patch', 'patch.object' (so `patch.object` finds
--     `mock.patch.object`);
--   * its segments as ordinary words ('mock', 'patch', 'object', stemmed as the configuration does),
--     which the parser leaves out of a dotted "host" token.
-- A name counts once per occurrence (tf). Every function called is built in, so a restore (pg_dump
-- runs with an empty search_path) computes the column the same way.
CREATE OR REPLACE FUNCTION archivist_tsvector(cfg regconfig, body text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
WITH names AS (
    SELECT lower(m[1]) AS name
    FROM regexp_matches(
        body,
        '([[:alpha:]_][[:alnum:]_]*(?:(?:\.|::)[[:alpha:]_][[:alnum:]_]*)+|[[:alnum:]]+(?:_+[[:alnum:]]+)+)',
        'g'
    ) AS m
    WHERE length(m[1]) <= 200
),
counted AS (
    SELECT name, count(*)::int AS tf, regexp_split_to_array(name, '(?=\.|::)') AS seg FROM names GROUP BY name
),
forms AS (
    SELECT ltrim(array_to_string(c.seg[i:j], ''), '.:') AS form, sum(c.tf)::int AS tf
    FROM counted c, generate_series(1, cardinality(c.seg)) AS i, generate_series(i, cardinality(c.seg)) AS j
    WHERE (j > i OR cardinality(c.seg) = 1) AND (j - i < 4 OR (i = 1 AND j = cardinality(c.seg)))
    GROUP BY 1
)
SELECT to_tsvector(cfg, body)
    || to_tsvector(cfg, coalesce((SELECT string_agg(translate(name, '.:', '  '), ' ') FROM names WHERE name ~ '[.:]'), ''))
    || coalesce(
        (SELECT string_agg('''' || form || ''':' || array_to_string(ARRAY(SELECT generate_series(1, least(tf, 255))), ','), ' ')
         FROM forms)::tsvector,
        ''::tsvector
    )
$$;

-- Existing chunks are re-analysed: the column is recomputed by a table rewrite, which fires no
-- trigger, so the BM25 postings and totals (sql/004, 012) are rebuilt from it below, as
-- services/search/bm25_index.py does for bulk loads. One pass over every chunk, at the first start.
ALTER TABLE chunks DROP COLUMN tsv,
    ADD COLUMN tsv tsvector GENERATED ALWAYS AS (archivist_tsvector('{fts_config}'::regconfig, context || ' ' || text)) STORED;
CREATE INDEX IF NOT EXISTS chunks_tsv_gin_idx ON chunks USING gin (tsv);

TRUNCATE chunk_terms, bm25_totals;
ALTER TABLE chunk_terms DROP CONSTRAINT IF EXISTS chunk_terms_pkey;
DROP INDEX IF EXISTS chunk_terms_impact_idx;
INSERT INTO bm25_totals (chunks, length) SELECT count(*), coalesce(sum(tsvector_length(tsv)), 0) FROM chunks;
INSERT INTO chunk_terms (term, chunk_id, source_id, tf, dl, impact)
SELECT u.lexeme, c.id, c.source_id, coalesce(array_length(u.positions, 1), 1), c.dl,
       bm25_impact(coalesce(array_length(u.positions, 1), 1), c.dl, a.avgdl)
FROM (SELECT bm25_avgdl() AS avgdl) a,
     (SELECT id, source_id, tsv, tsvector_length(tsv) AS dl FROM chunks OFFSET 0) c, unnest(c.tsv) u;
ALTER TABLE chunk_terms ADD CONSTRAINT chunk_terms_pkey PRIMARY KEY (term, chunk_id);
CREATE INDEX IF NOT EXISTS chunk_terms_impact_idx ON chunk_terms (term, impact DESC) INCLUDE (chunk_id, source_id);
ANALYZE chunks;
ANALYZE chunk_terms;
