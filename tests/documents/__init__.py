"""Documents and sources (services/documents/, services/sources/): ingest, two-phase indexing,
freshness, links, re-embedding, backups, versions."""
