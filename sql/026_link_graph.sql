-- Issue 32.7: the page graph resolves a link to a document with that URL in any source the caller
-- may see (services/documents/links.py), and finds backlinks from every such source: look-ups by URL
-- alone, which the (source_id, url) and (source_id, to_url) indexes cannot serve.
CREATE INDEX IF NOT EXISTS documents_url_idx ON documents (url) WHERE url IS NOT NULL;
CREATE INDEX IF NOT EXISTS document_links_to_url_idx ON document_links (to_url);
