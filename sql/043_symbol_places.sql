-- Where a documented name's entry starts in its page's text (issue 36, point 7): the character offset in
-- documents.content of the element that documents it (services/pages/api_places.py), so hybrid search
-- lifts the chunk that holds the entry (services/search/names.py). NULL for code definitions and for
-- names recorded before this column (the page's chunk naming it is used instead).
ALTER TABLE code_symbols ADD COLUMN IF NOT EXISTS char_start integer;
