-- Links between documents of a source (crawled pages): outlinks by URL, resolved to documents when stored.
CREATE TABLE IF NOT EXISTS document_links (
    from_document_id uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    to_url text NOT NULL,
    PRIMARY KEY (from_document_id, to_url)
);
CREATE INDEX IF NOT EXISTS document_links_to_idx ON document_links (source_id, to_url);
