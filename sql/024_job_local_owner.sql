-- Whether the local owner queued a job (command line, stdio, an open loopback server or console), said
-- explicitly: a job reads the variables its crawl headers or git token name through the secret gate
-- (services/access/secret_gate.py) in its own scope, and only the local owner may have variables the
-- operator did not list in ARCHIVIST_SECRET_ENV sent. A token reaching every source is not the owner.
-- Jobs queued before this migration: the owner's caller names (reserved: no token may take one).
ALTER TABLE crawl_jobs ADD COLUMN IF NOT EXISTS local_owner boolean NOT NULL DEFAULT false;
UPDATE crawl_jobs SET local_owner = true
    WHERE started_by IN ('local', 'stdio', 'console', 'owner') AND status IN ('queued', 'running');
