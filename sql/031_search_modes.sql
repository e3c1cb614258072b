-- A profile's default search_type may be any of models.SEARCH_TYPES: `code` (hybrid over code documents)
-- and `question` (another name for hybrid) join (issue 32, point 3).
ALTER TABLE profiles DROP CONSTRAINT IF EXISTS profiles_search_type_check;
ALTER TABLE profiles ADD CONSTRAINT profiles_search_type_check
    CHECK (search_type IN ('hybrid', 'vector', 'rerank', 'keyword', 'code', 'question'));
