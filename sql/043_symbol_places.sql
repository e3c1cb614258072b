-- Where a documented name's entry starts in its page's text (issue 36, point 7): the character offset in
-- documents.content of the element that documents it (services/pages/api_places.py), so hybrid search
-- lifts the chunk that holds the entry (services/search/names.py). NULL for code definitions and for
-- names recorded before this column (the page's chunk naming it is used instead).
ALTER TABLE code_symbols ADD COLUMN IF NOT EXISTS char_start integer;

-- Qualified references (issue 36): each use of a name in a Python file with the qualifier it resolves to
-- through the file's imports (services/code/qualified.py): `shutil.copytree(...)`, `sh.copytree` after
-- `import shutil as sh`, `copytree(...)` after `from shutil import copytree`; "." is the file's own
-- module (its path names it when read). A qualified references search keeps the uses whose qualifier
-- ends with the query's.
CREATE TABLE IF NOT EXISTS code_qualified_references (
    source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    document_id uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    name text NOT NULL,
    qualifier text NOT NULL,
    lines integer[] NOT NULL,
    PRIMARY KEY (document_id, name, qualifier, source_id)
);
CREATE INDEX IF NOT EXISTS code_qualified_references_name_idx ON code_qualified_references (name);
-- How many qualified uses a file's extraction kept; NULL: written before this table, so the symbol
-- backfill (services/code/symbol_backfill.py) writes the file's symbols again.
ALTER TABLE code_symbol_files ADD COLUMN IF NOT EXISTS qualified integer;
