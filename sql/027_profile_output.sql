-- Issue 32.1: a profile's output settings, the shape of the hits of a caller searching as it
-- (services/access/profile_settings.py): text cut at snippet_chars characters, and the fields a hit
-- carries beside the core ones (NULL: every field).
ALTER TABLE profiles ADD COLUMN IF NOT EXISTS snippet_chars integer CHECK (snippet_chars BETWEEN 50 AND 1000);
ALTER TABLE profiles ADD COLUMN IF NOT EXISTS hit_fields text[];
