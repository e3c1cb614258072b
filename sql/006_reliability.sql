-- No duplicate sources: merge the sources that share an identity (title in any case, url, version) into
-- the oldest of them (documents and everything else moved, nothing lost), then make the identity unique.
-- Runs before 007 on a new database and after it on an older one: both orders end with the same index.
ALTER TABLE sources ADD COLUMN IF NOT EXISTS version text;

DO $$
DECLARE
    pair record;
    doc record;
    fk record;
    taken record;
BEGIN
    CREATE TEMP TABLE source_merge ON COMMIT DROP AS
        SELECT id AS dupe, keeper FROM (
            SELECT id, first_value(id) OVER (
                PARTITION BY lower(title), coalesce(url, ''), coalesce(version, '') ORDER BY created_at, id
            ) AS keeper
            FROM sources
        ) ranked
        WHERE id <> keeper;

    FOR pair IN SELECT dupe, keeper FROM source_merge LOOP
        -- Documents: a URL the keeper already holds is either the same content (dropped: nothing lost)
        -- or different content (kept, its url marked so documents_source_url_key still holds).
        FOR doc IN SELECT id, url, content_hash FROM documents WHERE source_id = pair.dupe ORDER BY created_at, id LOOP
            SELECT id, content_hash INTO taken FROM documents
                WHERE source_id = pair.keeper AND url IS NOT DISTINCT FROM doc.url AND doc.url IS NOT NULL;
            IF FOUND AND taken.content_hash = doc.content_hash THEN
                DELETE FROM documents WHERE id = doc.id;
                CONTINUE;
            ELSIF FOUND THEN
                UPDATE documents SET url = doc.url || '#merged-' || left(doc.id::text, 8) WHERE id = doc.id;
            END IF;
            UPDATE documents SET source_id = pair.keeper WHERE id = doc.id;
        END LOOP;

        -- Every other table pointing at sources (chunks, links, crawl jobs, folders, ...): move its rows;
        -- rows that would collide with the keeper's own (per-source caches and bindings) are dropped.
        FOR fk IN
            SELECT c.conrelid::regclass AS tbl, a.attname AS col
            FROM pg_constraint c
            JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
            WHERE c.contype = 'f' AND c.confrelid = 'sources'::regclass
              AND array_length(c.conkey, 1) = 1 AND c.conrelid <> 'documents'::regclass
        LOOP
            BEGIN
                EXECUTE format('UPDATE %s SET %I = $1 WHERE %I = $2', fk.tbl, fk.col, fk.col)
                    USING pair.keeper, pair.dupe;
            EXCEPTION WHEN unique_violation THEN
                EXECUTE format('DELETE FROM %s WHERE %I = $1', fk.tbl, fk.col) USING pair.dupe;
            END;
        END LOOP;

        UPDATE sources k SET
            description = coalesce(k.description, d.description),
            metadata = d.metadata || k.metadata,
            updated_at = now()
        FROM sources d WHERE k.id = pair.keeper AND d.id = pair.dupe;
        DELETE FROM sources WHERE id = pair.dupe;
    END LOOP;
END $$;

CREATE UNIQUE INDEX IF NOT EXISTS sources_identity_uq ON sources (lower(title), coalesce(url, ''), coalesce(version, ''));
