-- Packed references and slimmer definitions (issue 36): a file's references in one row, converted in place
-- A row per (file, name) cost ~200 bytes (tuple header, two uuids, its array, a primary key and a name
-- index entry of its own) to hold a few line numbers: the reference tables were twice the code's own
-- bytes. Now each file has one row: its distinct names, and the lines of all of them in one array,
-- `ends[i]` the position in `lines` of the last line of `names[i]` (its lines are
-- lines[ends[i-1]+1 : ends[i]], ends[0] being 0). TOAST compresses the arrays, and a GIN over `names`
-- stores each distinct name once with a compressed list of the rows holding it; a lookup reads the
-- rows of the files that use the name and slices its lines out (services/code/symbol_search.py).
ALTER TABLE code_references RENAME TO code_references_rows;
ALTER TABLE code_qualified_references RENAME TO code_qualified_references_rows;

CREATE TABLE code_references (
    source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    document_id uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    names text[] NOT NULL,  -- distinct
    ends integer[] NOT NULL,
    lines integer[] NOT NULL,  -- each name's sorted distinct lines, one name after another
    CONSTRAINT code_reference_files_pkey PRIMARY KEY (document_id, source_id)
);
CREATE INDEX code_reference_files_names_idx ON code_references USING gin (names);

-- The same for the qualified uses of Python files: (names[i], qualifiers[i]) are distinct pairs.
CREATE TABLE code_qualified_references (
    source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    document_id uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    names text[] NOT NULL,
    qualifiers text[] NOT NULL,
    ends integer[] NOT NULL,
    lines integer[] NOT NULL,
    CONSTRAINT code_qualified_reference_files_pkey PRIMARY KEY (document_id, source_id)
);
CREATE INDEX code_qualified_reference_files_names_idx ON code_qualified_references USING gin (names);

INSERT INTO code_references (source_id, document_id, names, ends, lines)
SELECT source_id, document_id, array_agg(name ORDER BY name),
       array_agg(ends::integer ORDER BY name),
       string_to_array(string_agg(array_to_string(lines, ','), ',' ORDER BY name), ',')::integer[]
FROM (SELECT source_id, document_id, name, lines,
             sum(cardinality(lines)) OVER (PARTITION BY document_id ORDER BY name) AS ends
      FROM code_references_rows WHERE cardinality(lines) > 0) r
GROUP BY source_id, document_id;

INSERT INTO code_qualified_references (source_id, document_id, names, qualifiers, ends, lines)
SELECT source_id, document_id, array_agg(name ORDER BY name, qualifier), array_agg(qualifier ORDER BY name, qualifier),
       array_agg(ends::integer ORDER BY name, qualifier),
       string_to_array(string_agg(array_to_string(lines, ','), ',' ORDER BY name, qualifier), ',')::integer[]
FROM (SELECT source_id, document_id, name, qualifier, lines,
             sum(cardinality(lines)) OVER (PARTITION BY document_id ORDER BY name, qualifier) AS ends
      FROM code_qualified_references_rows WHERE cardinality(lines) > 0) r
GROUP BY source_id, document_id;

DROP TABLE code_references_rows;
DROP TABLE code_qualified_references_rows;

-- Definitions: the surrogate key goes (nothing reads it; a definition is found by its name or its file),
-- and the file index keys on document_id alone, which B-tree deduplication stores once per file with the
-- list of its rows instead of an entry per row; an outline sorts its file's few rows itself.
ALTER TABLE code_symbols DROP CONSTRAINT IF EXISTS code_symbols_pkey;
ALTER TABLE code_symbols DROP COLUMN IF EXISTS id;
DROP INDEX IF EXISTS code_symbols_document_idx;
CREATE INDEX code_symbols_document_idx ON code_symbols (document_id);
