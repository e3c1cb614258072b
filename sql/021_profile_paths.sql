-- Issue 23, point 5: a profile may carry its own allowed paths (directories). A caller confined to
-- profiles reads files only under the union of its profiles' paths that lie inside the server's
-- ARCHIVIST_ALLOWED_PATHS; NULL = not set (such a profile grants no files).
ALTER TABLE profiles ADD COLUMN IF NOT EXISTS allowed_paths text[];
