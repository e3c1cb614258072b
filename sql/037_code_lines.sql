-- The line index of code and text files from synced sources (issue 36): each file's lines in blocks of
-- a few KB (services/code/lines.py), a trigram index over them for grep (services/code/grep.py). A
-- block row per ~4 KB keeps the heap and the trigram postings well under the code's own bytes; a line
-- row each would cost more than the code. `source_id` leads the key: a distributed PostgreSQL shards
-- on it. Written in the transaction that writes the document's chunks; a deleted document drops them.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE IF NOT EXISTS code_blocks (
    id bigint GENERATED ALWAYS AS IDENTITY,
    source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    document_id uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    -- lines line_start..line_end, one per "\n"-separated segment of `text`; a block holding one long
    -- line (line_start = line_end) has its pieces as segments instead
    line_start integer NOT NULL,
    line_end integer NOT NULL,
    text text NOT NULL,
    PRIMARY KEY (source_id, id)
);
CREATE INDEX IF NOT EXISTS code_blocks_document_idx ON code_blocks (document_id, line_start);
CREATE INDEX IF NOT EXISTS code_blocks_trgm_idx ON code_blocks USING gin (text gin_trgm_ops);

-- Where each indexed document sits: the manifests of git and folder syncs (several paths may share a
-- document with identical content, and a rename only moves the manifest row).
CREATE OR REPLACE VIEW code_paths AS
    SELECT source_id, path, document_id FROM git_files
    UNION ALL
    SELECT source_id, path, document_id FROM folder_files;
