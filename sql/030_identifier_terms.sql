-- Identifiers searchable whole and by part (issue 29). The BM25 postings (chunk_terms, sql/004 and 012)
-- and the query are both analysed as to_tsvector plus archivist_name_terms: for each dotted, namespaced
-- or snake_case name in the text (`mock.patch.object`, `tokio::spawn`, `dirs_exist_ok`),
--   * the whole name, lower-cased, unstemmed: 'mock.patch.object' (PostgreSQL's parser keeps only some
--     dotted names whole, as "host" tokens, and splits snake_case and `::` names into words);
--   * each run of 2 to 4 of its segments: 'mock.patch', 'patch.object' (so `patch.object` finds
--     `mock.patch.object`);
--   * its segments as ordinary words ('mock', 'patch', 'object', stemmed as the configuration does),
--     which the parser leaves out of a dotted "host" token.
-- A name counts once per occurrence (tf).
--
-- chunks.tsv stays as it is (to_tsvector; the GIN index and the ts_rank leg read it): changing that
-- generated column would rewrite the table and rebuild every index of chunks, the HNSW graph
-- included, at the first start. Only the postings and totals are rebuilt below, from
-- archivist_chunk_terms(tsv, context || ' ' || text), which the chunk triggers now index.
CREATE OR REPLACE FUNCTION archivist_name_terms(cfg regconfig, body text) RETURNS tsvector
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
SELECT to_tsvector(cfg, coalesce((SELECT string_agg(translate(name, '.:', '  '), ' ') FROM names WHERE name ~ '[.:]'), ''))
    || coalesce(
        (SELECT string_agg('''' || form || ''':' || array_to_string(ARRAY(SELECT generate_series(1, least(tf, 255))), ','), ' ')
         FROM forms)::tsvector,
        ''::tsvector
    )
$$;

-- How a query is analysed (services/search/bm25.py, base.py).
CREATE OR REPLACE FUNCTION archivist_tsvector(cfg regconfig, body text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_tsvector(cfg, body) || archivist_name_terms(cfg, body)
$$;

-- What a chunk's postings hold: its tsv (to_tsvector of context and text) and its names.
CREATE OR REPLACE FUNCTION archivist_chunk_terms(tsv tsvector, body text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT tsv || archivist_name_terms('{fts_config}'::regconfig, body)
$$;

-- The chunk triggers of sql/004 and sql/012, indexing archivist_chunk_terms instead of tsv. An update
-- re-indexes a chunk whose text, context or source changed (a name can change while tsv does not:
-- `dirs exist ok` and `dirs_exist_ok` have the same tsv).
CREATE OR REPLACE FUNCTION bm25_chunks_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH n AS (
        SELECT id, source_id, terms, tsvector_length(terms) AS dl
        FROM (SELECT id, source_id, archivist_chunk_terms(tsv, context || ' ' || text) AS terms FROM added OFFSET 0) a
    ),
    tot AS (INSERT INTO bm25_totals (chunks, length) SELECT count(*), coalesce(sum(dl), 0) FROM n HAVING count(*) > 0),
    avg AS (  -- the average length with these chunks counted (the insert above is not visible here)
        SELECT greatest((coalesce(sum(b.length), 0) + (SELECT coalesce(sum(dl), 0) FROM n))
                        / nullif(coalesce(sum(b.chunks), 0) + (SELECT count(*) FROM n), 0), 1.0) AS v
        FROM bm25_totals b
    )
    INSERT INTO chunk_terms (term, chunk_id, source_id, tf, dl, impact)
    SELECT u.lexeme, n.id, n.source_id, coalesce(array_length(u.positions, 1), 1), n.dl,
           bm25_impact(coalesce(array_length(u.positions, 1), 1), n.dl, coalesce(avg.v, 1.0))
    FROM n CROSS JOIN avg, unnest(n.terms) u;
    PERFORM bm25_fold_totals();
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION bm25_chunks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH o AS (
        SELECT id, terms, tsvector_length(terms) AS dl
        FROM (SELECT id, archivist_chunk_terms(tsv, context || ' ' || text) AS terms FROM removed OFFSET 0) a
    ),
    tot AS (INSERT INTO bm25_totals (chunks, length) SELECT -count(*), -coalesce(sum(dl), 0) FROM o HAVING count(*) > 0)
    DELETE FROM chunk_terms t USING o, unnest(o.terms) u WHERE t.term = u.lexeme AND t.chunk_id = o.id;
    PERFORM bm25_fold_totals();
    RETURN NULL;
END
$$;

-- Only rows whose text, context or source changed are re-indexed: re-embedding touches every row but
-- no text.
CREATE OR REPLACE FUNCTION bm25_chunks_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM chunk_terms t
    USING (
        SELECT o.id, archivist_chunk_terms(o.tsv, o.context || ' ' || o.text) AS terms
        FROM before_rows o JOIN after_rows n ON n.id = o.id
        WHERE o.text IS DISTINCT FROM n.text OR o.context IS DISTINCT FROM n.context
           OR o.source_id IS DISTINCT FROM n.source_id
        OFFSET 0
    ) c, unnest(c.terms) u
    WHERE t.term = u.lexeme AND t.chunk_id = c.id;
    WITH changed AS (
        SELECT n.id, n.source_id, archivist_chunk_terms(n.tsv, n.context || ' ' || n.text) AS terms,
               tsvector_length(archivist_chunk_terms(o.tsv, o.context || ' ' || o.text)) AS old_dl
        FROM after_rows n JOIN before_rows o ON o.id = n.id
        WHERE o.text IS DISTINCT FROM n.text OR o.context IS DISTINCT FROM n.context
           OR o.source_id IS DISTINCT FROM n.source_id
        OFFSET 0
    ),
    c AS (SELECT id, source_id, terms, tsvector_length(terms) AS dl, old_dl FROM changed),
    tot AS (INSERT INTO bm25_totals (chunks, length) SELECT 0, sum(dl - old_dl) FROM c HAVING count(*) > 0)
    INSERT INTO chunk_terms (term, chunk_id, source_id, tf, dl, impact)
    SELECT u.lexeme, c.id, c.source_id, coalesce(array_length(u.positions, 1), 1), c.dl,
           bm25_impact(coalesce(array_length(u.positions, 1), 1), c.dl, bm25_avgdl())
    FROM c, unnest(c.terms) u;
    RETURN NULL;
END
$$;

-- Existing postings are rebuilt from the chunks (as services/search/bm25_index.py rebuilds them).
TRUNCATE chunk_terms, bm25_totals;
ALTER TABLE chunk_terms DROP CONSTRAINT IF EXISTS chunk_terms_pkey;
DROP INDEX IF EXISTS chunk_terms_impact_idx;
CREATE TEMP TABLE archivist_rebuild ON COMMIT DROP AS
SELECT id, source_id, terms, tsvector_length(terms) AS dl
FROM (SELECT id, source_id, archivist_chunk_terms(tsv, context || ' ' || text) AS terms FROM chunks) c;
INSERT INTO bm25_totals (chunks, length) SELECT count(*), coalesce(sum(dl), 0) FROM archivist_rebuild;
INSERT INTO chunk_terms (term, chunk_id, source_id, tf, dl, impact)
SELECT u.lexeme, c.id, c.source_id, coalesce(array_length(u.positions, 1), 1), c.dl,
       bm25_impact(coalesce(array_length(u.positions, 1), 1), c.dl, a.avgdl)
FROM (SELECT bm25_avgdl() AS avgdl) a, archivist_rebuild c, unnest(c.terms) u;
ALTER TABLE chunk_terms ADD CONSTRAINT chunk_terms_pkey PRIMARY KEY (term, chunk_id);
CREATE INDEX IF NOT EXISTS chunk_terms_impact_idx ON chunk_terms (term, impact DESC) INCLUDE (chunk_id, source_id);
ANALYZE chunk_terms;
