-- Open is a state someone chose, never a consequence (issue 38): whether this knowledge base has ever
-- had an access token or an identity provider. Set once, never cleared: revoking or expiring the last
-- token leaves it set, so an HTTP server does not fall back to serving unauthenticated callers as
-- the owner (services/access/open_state.py reads it). One row at most.
CREATE TABLE IF NOT EXISTS access_state (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    secured_at timestamptz NOT NULL DEFAULT now(),
    secured_by text NOT NULL
);

-- An existing knowledge base that ever had a token (revoked and expired ones included) or a grant for
-- an identity provider's members has been secured.
INSERT INTO access_state (secured_by)
SELECT CASE WHEN EXISTS (SELECT 1 FROM access_tokens) THEN 'token' ELSE 'identity provider' END
WHERE EXISTS (SELECT 1 FROM access_tokens) OR EXISTS (SELECT 1 FROM profile_grants)
ON CONFLICT (only_row) DO NOTHING;

-- Every token and grant, from whichever process or statement, secures the knowledge base in the same
-- transaction: the flag cannot lag behind the row that set it.
CREATE OR REPLACE FUNCTION archivist_secure_access() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO access_state (secured_by) VALUES (TG_ARGV[0]) ON CONFLICT (only_row) DO NOTHING;
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS access_tokens_secure ON access_tokens;
CREATE TRIGGER access_tokens_secure AFTER INSERT ON access_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION archivist_secure_access('token');
DROP TRIGGER IF EXISTS profile_grants_secure ON profile_grants;
CREATE TRIGGER profile_grants_secure AFTER INSERT ON profile_grants
    FOR EACH STATEMENT EXECUTE FUNCTION archivist_secure_access('identity provider');
