-- A query's lexemes, as archivist_tsvector analyses them (sql/030), without the cost of looking for names
-- where there can be none (issue 37, search latency). archivist_name_terms only ever finds a name holding
-- '.', '::' or '_' (its two patterns need one of them), and costs ~0.5 ms a call even when it finds
-- nothing; the term statistics of a search (services/search/bm25.py) analyse the query and each of its
-- words, so a ten-word question paid for eleven empty searches. A text without any of those characters
-- gets to_tsvector alone, the lexemes archivist_tsvector gives it.
CREATE OR REPLACE FUNCTION archivist_query_tsvector(cfg regconfig, body text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN translate(body, '._:', '') = body THEN to_tsvector(cfg, body)
                ELSE archivist_tsvector(cfg, body) END
$$;
