-- A query's lexemes with the name search skipped wherever no name can match (issue 37, keyword latency).
--
-- sql/045 skipped archivist_name_terms only for texts without any '.', '_' or ':'. Questions end in a
-- full stop, so nearly every query (and its last word, analysed again by the term statistics) still
-- paid for a name search that finds nothing: at a million chunks, half of the term statistics'
-- backend time (SciFact, 200 questions: 1.6-2.1 ms -> 1.0-1.1 ms CPU each, the same rows).
-- archivist_name_terms' two patterns each need, somewhere in the text, a letter, digit or '_' followed
-- by '.' or '::' and then a letter or '_' (a dotted or '::' name), or a letter or digit, one or more '_'
-- and a letter or digit (a snake_case name). A text with neither holds no name: its name terms are
-- empty and archivist_tsvector gives to_tsvector's lexemes alone, exactly.
CREATE OR REPLACE FUNCTION archivist_may_hold_name(body text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT body ~ '[[:alnum:]_](\.|::)[[:alpha:]_]|[[:alnum:]]_+[[:alnum:]]'
$$;

CREATE OR REPLACE FUNCTION archivist_query_tsvector(cfg regconfig, body text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN archivist_may_hold_name(body) THEN archivist_tsvector(cfg, body)
                ELSE to_tsvector(cfg, body) END
$$;
