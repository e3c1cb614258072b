-- A profile's default search_type may be `keyword` (BM25 only), like the search tool's: widen the
-- check 005_access.sql gave the column (PostgreSQL named it profiles_search_type_check).
ALTER TABLE profiles DROP CONSTRAINT IF EXISTS profiles_search_type_check;
ALTER TABLE profiles ADD CONSTRAINT profiles_search_type_check
    CHECK (search_type IN ('hybrid', 'vector', 'rerank', 'keyword'));
