-- Slimmer definitions (issue 36, storage): a definition's qualified name is stored only when its parent
-- and name do not already spell it. 75,712 of the 75,718 definitions of the Python standard library have
-- qualified_name = parent || '.' || name (or name, at the top level): 2.4 MB of 18.9 MB in code_symbols.
-- Those rows now hold NULL and every reader spells the name through code_qualified_name (inlined by the
-- planner); C++ `A::b`, a Go or Java package's top-level names and documented names keep theirs.
-- Converts in place: the rows that spell it are set to NULL (their space is reused as rows are written;
-- a VACUUM FULL code_symbols gives it back at once).
ALTER TABLE code_symbols ALTER COLUMN qualified_name DROP NOT NULL;

CREATE OR REPLACE FUNCTION code_qualified_name(name text, parent text, qualified text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(qualified, CASE WHEN parent IS NULL THEN name ELSE parent || '.' || name END)
$$;

UPDATE code_symbols SET qualified_name = NULL
WHERE qualified_name = CASE WHEN parent IS NULL THEN name ELSE parent || '.' || name END;
