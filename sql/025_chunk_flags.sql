-- Issue 30: injection flags. Each chunk carries the short names of what in it speaks to an agent rather
-- than to a reader (services/flags): hidden_text, invisible_chars, prompt_injection, system_prompt,
-- tool_call, remote_shell; an empty array when the scan found nothing. NULL means the chunk was stored
-- before flags existed and is not scanned yet: hits show it as "unscanned" and a profile that leaves
-- flagged chunks out leaves it out too. Adding a nullable column rewrites no row; the worker scans
-- unscanned chunks in the background (services/flags/store.py) and `archivist flags scan --all` scans
-- every chunk again after the rules change.
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS flags text[];
CREATE INDEX IF NOT EXISTS chunks_flagged_idx ON chunks (source_id) WHERE cardinality(flags) > 0;
CREATE INDEX IF NOT EXISTS chunks_unscanned_idx ON chunks (source_id) WHERE flags IS NULL;
-- A profile may leave flagged (and unscanned) chunks out of its searches.
ALTER TABLE profiles ADD COLUMN IF NOT EXISTS exclude_flagged boolean NOT NULL DEFAULT false;
