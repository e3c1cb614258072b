-- The symbol table of synced code and documentation (issue 36, services/code/symbols*.py): the
-- definitions of each code file from its syntax tree, the names each API reference page documents
-- (with the anchor that documents them, `line_start` NULL), and where each name is used. Every key
-- holds `source_id`: a distributed PostgreSQL shards on it. Written in the transaction that writes the
-- document's chunks; a deleted document drops them. Paths are not stored: a file's path lives in its
-- sync manifest (git_files, folder_files) or metadata, so a rename moves nothing here.
CREATE TABLE IF NOT EXISTS code_symbol_files (
    source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    document_id uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    language text NOT NULL,
    definitions integer NOT NULL,
    "references" integer NOT NULL,
    capped text,  -- what stopped the extraction early (a parse budget), NULL when nothing did
    PRIMARY KEY (source_id, document_id)
);
CREATE UNIQUE INDEX IF NOT EXISTS code_symbol_files_document_idx ON code_symbol_files (document_id);

CREATE TABLE IF NOT EXISTS code_symbols (
    id bigint GENERATED ALWAYS AS IDENTITY,
    source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    document_id uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    name text NOT NULL,
    kind text NOT NULL,
    qualified_name text NOT NULL,
    parent text,
    line_start integer,
    line_end integer,
    signature text NOT NULL DEFAULT '',
    doc text NOT NULL DEFAULT '',
    anchor text,  -- a documented name: the fragment of its entry on the page
    PRIMARY KEY (source_id, id)
);
CREATE INDEX IF NOT EXISTS code_symbols_name_idx ON code_symbols (name);
CREATE INDEX IF NOT EXISTS code_symbols_document_idx ON code_symbols (document_id, line_start);

-- One row per (file, name): the distinct lines where the name is used, definitions excluded. The key
-- leads with document_id: rewriting a file's rows and the cascade of a deleted document use it.
CREATE TABLE IF NOT EXISTS code_references (
    source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    document_id uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    name text NOT NULL,
    lines integer[] NOT NULL,
    PRIMARY KEY (document_id, name, source_id)
);
CREATE INDEX IF NOT EXISTS code_references_name_idx ON code_references (name);
