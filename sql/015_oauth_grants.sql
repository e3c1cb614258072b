-- Identity from the team's own login (issue 20): which profiles a token of the configured issuer
-- reaches, by a claim it carries (a group, its subject, or the domain of its verified email), and
-- whether that grant allows writes. A token matching no grant reaches nothing.
CREATE TABLE IF NOT EXISTS profile_grants (
    id bigserial PRIMARY KEY,
    profile text NOT NULL REFERENCES profiles (name) ON DELETE CASCADE ON UPDATE CASCADE,
    kind text NOT NULL CHECK (kind IN ('group', 'subject', 'email_domain')),
    value text NOT NULL CHECK (value <> ''),
    write boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (profile, kind, value)
);
CREATE INDEX IF NOT EXISTS profile_grants_match_idx ON profile_grants (kind, value);
