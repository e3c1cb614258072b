-- Issue 21, points 5 and 9: how fresh each document is, what changed in a source since a time, and
-- recrawls that keep their shape.

-- Freshness. fetched_at: a page fetched from the web (crawl or url ingest), the last time it was
-- fetched (200 or 304). ingested_at: files and text, when the current content was stored. indexed_at:
-- when the document's chunks were last written. The server's Last-Modified / a file's mtime stay in
-- metadata (`last_modified`, `file_mtime`).
ALTER TABLE documents ADD COLUMN IF NOT EXISTS fetched_at timestamptz;
ALTER TABLE documents ADD COLUMN IF NOT EXISTS ingested_at timestamptz;
ALTER TABLE documents ADD COLUMN IF NOT EXISTS indexed_at timestamptz;

CREATE OR REPLACE FUNCTION documents_fetched(metadata jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT metadata ?| array['crawl_job_id', 'http_status']
$$;

UPDATE documents SET
    indexed_at = coalesce(indexed_at, updated_at),
    fetched_at = CASE WHEN documents_fetched(metadata) THEN coalesce(fetched_at, updated_at) END,
    ingested_at = CASE WHEN NOT documents_fetched(metadata) THEN coalesce(ingested_at, updated_at) END;
UPDATE documents d SET fetched_at = f.fetched_at
FROM (SELECT document_id, max(fetched_at) AS fetched_at FROM crawl_frontier
      WHERE document_id IS NOT NULL AND state = 'done' GROUP BY document_id) f
WHERE d.id = f.document_id AND f.fetched_at > d.fetched_at;

CREATE OR REPLACE FUNCTION documents_freshness() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rewritten boolean := TG_OP = 'INSERT' OR NEW.content_hash IS DISTINCT FROM OLD.content_hash;
BEGIN
    IF rewritten OR NEW.title IS DISTINCT FROM OLD.title THEN
        NEW.indexed_at := now();  -- a new title is embedded with every chunk: they are rewritten too
    END IF;
    IF rewritten AND documents_fetched(NEW.metadata) THEN
        NEW.fetched_at := now();
    ELSIF rewritten THEN
        NEW.ingested_at := now();
    END IF;
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS documents_freshness ON documents;
CREATE TRIGGER documents_freshness BEFORE INSERT OR UPDATE ON documents
    FOR EACH ROW EXECUTE FUNCTION documents_freshness();

-- Changes: one row per document created, updated (content, title or url) or deleted (a tombstone), for
-- manage_source(action='changes'). `sections` lists the heading paths (' › ' joined, '' for text before
-- the first heading) whose chunk texts changed; `prior` holds the old chunks' section hashes between
-- the document's update and the writing of its new chunks (same transaction, `txid`).
CREATE TABLE IF NOT EXISTS document_changes (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    document_id uuid NOT NULL,
    change text NOT NULL CHECK (change IN ('created', 'updated', 'deleted')),
    title text NOT NULL,
    url text,
    fields text[] NOT NULL DEFAULT '{{}}',
    sections text[] NOT NULL DEFAULT '{{}}',
    prior jsonb,
    txid bigint NOT NULL DEFAULT txid_current(),
    changed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS document_changes_source_idx ON document_changes (source_id, changed_at);
CREATE INDEX IF NOT EXISTS document_changes_prior_idx ON document_changes (document_id, txid) WHERE prior IS NOT NULL;

CREATE OR REPLACE FUNCTION document_sections(doc uuid) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_object_agg(section, jsonb_build_object('i', first, 'h', hashes)), '{{}}'::jsonb)
    FROM (SELECT array_to_string(heading_path, ' › ') AS section, min(chunk_index) AS first,
                 jsonb_agg(md5(text) ORDER BY chunk_index) AS hashes
          FROM chunks WHERE document_id = doc GROUP BY 1) s
$$;

CREATE OR REPLACE FUNCTION documents_log_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed text[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO document_changes (source_id, document_id, change, title, url)
        VALUES (NEW.source_id, NEW.id, 'created', NEW.title, NEW.url);
    ELSIF TG_OP = 'DELETE' THEN
        -- a source being deleted takes its documents and its change log with it: no tombstones
        IF EXISTS (SELECT 1 FROM sources WHERE id = OLD.source_id) THEN
            INSERT INTO document_changes (source_id, document_id, change, title, url)
            VALUES (OLD.source_id, OLD.id, 'deleted', OLD.title, OLD.url);
        END IF;
    ELSE
        changed := array_remove(ARRAY[
            CASE WHEN NEW.content_hash IS DISTINCT FROM OLD.content_hash THEN 'content' END,
            CASE WHEN NEW.title IS DISTINCT FROM OLD.title THEN 'title' END,
            CASE WHEN NEW.url IS DISTINCT FROM OLD.url THEN 'url' END], NULL);
        INSERT INTO document_changes (source_id, document_id, change, title, url, fields, prior)
        VALUES (NEW.source_id, NEW.id, 'updated', NEW.title, NEW.url, changed,
                CASE WHEN 'content' = ANY(changed) THEN document_sections(NEW.id) END);
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS documents_log_insert ON documents;
CREATE TRIGGER documents_log_insert AFTER INSERT ON documents FOR EACH ROW EXECUTE FUNCTION documents_log_change();
DROP TRIGGER IF EXISTS documents_log_update ON documents;
CREATE TRIGGER documents_log_update AFTER UPDATE ON documents FOR EACH ROW
    WHEN (OLD.content_hash IS DISTINCT FROM NEW.content_hash OR OLD.title IS DISTINCT FROM NEW.title
          OR OLD.url IS DISTINCT FROM NEW.url)
    EXECUTE FUNCTION documents_log_change();
DROP TRIGGER IF EXISTS documents_log_delete ON documents;
CREATE TRIGGER documents_log_delete AFTER DELETE ON documents FOR EACH ROW EXECUTE FUNCTION documents_log_change();

-- New chunks of an updated document: compare them with `prior` and record the sections that changed.
CREATE OR REPLACE FUNCTION chunks_log_sections() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH pending AS (
        SELECT c.id, c.document_id, c.prior FROM document_changes c
        WHERE c.prior IS NOT NULL AND c.txid = txid_current()
          AND c.document_id IN (SELECT DISTINCT document_id FROM added)
    ), new AS (
        SELECT a.document_id, array_to_string(a.heading_path, ' › ') AS section, min(a.chunk_index) AS first,
               jsonb_agg(md5(a.text) ORDER BY a.chunk_index) AS hashes
        FROM added a WHERE a.document_id IN (SELECT document_id FROM pending) GROUP BY 1, 2
    ), old AS (
        SELECT p.document_id, e.key AS section, (e.value->>'i')::int AS first, e.value->'h' AS hashes
        FROM pending p, jsonb_each(p.prior) e
    ), diff AS (
        SELECT coalesce(n.document_id, o.document_id) AS document_id, coalesce(n.section, o.section) AS section,
               coalesce(n.first, o.first) AS first
        FROM new n FULL JOIN old o ON o.document_id = n.document_id AND o.section = n.section
        WHERE n.hashes IS DISTINCT FROM o.hashes
    )
    UPDATE document_changes c SET prior = NULL,
        sections = coalesce((SELECT array_agg(d.section ORDER BY d.first, d.section) FROM diff d
                             WHERE d.document_id = c.document_id), '{{}}')
    FROM pending p WHERE c.id = p.id;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS chunks_log_sections ON chunks;
CREATE TRIGGER chunks_log_sections AFTER INSERT ON chunks REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION chunks_log_sections();

-- Recrawls that keep their shape (services/crawl/frontier.py). rank: the URL's place in discovery order
-- (its parent's rank, then the link's position on the parent), so the order of a level does not depend
-- on which page finished first. known: a page the source held when the recrawl started (revisited
-- first). reached: a link, sitemap or llms.txt of this crawl led to it (false: only known).
ALTER TABLE crawl_frontier ADD COLUMN IF NOT EXISTS rank integer[] NOT NULL DEFAULT '{{}}';
ALTER TABLE crawl_frontier ADD COLUMN IF NOT EXISTS known boolean NOT NULL DEFAULT false;
ALTER TABLE crawl_frontier ADD COLUMN IF NOT EXISTS reached boolean NOT NULL DEFAULT true;
CREATE INDEX IF NOT EXISTS crawl_frontier_open_idx ON crawl_frontier (job_id, depth)
    WHERE state IN ('pending', 'fetching');
