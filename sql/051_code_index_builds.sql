-- When grep's trigram index was last built in one pass (issue 36, services/code/trigram_upkeep.py). A GIN
-- maintained row by row as files are stored is ~2.4x the size of the same index built over the rows at
-- once; a worker rebuilds it (REINDEX CONCURRENTLY) once the rows inserted since the last build are a
-- large part of the table and writes have paused. `inserted` is the table's cumulative insert count
-- (pg_stat_user_tables.n_tup_ins) when that build started.
CREATE TABLE IF NOT EXISTS code_index_builds (
    index_name text PRIMARY KEY,
    inserted bigint NOT NULL,
    built_at timestamptz NOT NULL DEFAULT now()
);
