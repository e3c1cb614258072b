-- A source's identity (title in any case, url, version) is unique per namespace, no longer across the
-- whole database: a title another tenant took is no CONFLICT, so creating a source is no existence
-- oracle for other tenants' titles (SECURITY.md, boundary 1). The namespace is '' for sources the local
-- owner creates (command line, stdio, console, open loopback HTTP), else the profile a confined caller's
-- new source joins (its first profile; services/access/scope.py, Scope.namespace). Existing sources keep
-- '', where the old index already made them unique.
ALTER TABLE sources ADD COLUMN IF NOT EXISTS namespace text NOT NULL DEFAULT '';

DROP INDEX IF EXISTS sources_identity_uq;
CREATE UNIQUE INDEX IF NOT EXISTS sources_namespace_identity_uq
    ON sources (namespace, lower(title), coalesce(url, ''), coalesce(version, ''));
