"""Bulk (re)build of the BM25 postings (chunk_terms, bm25_totals; sql/004 and sql/012) from chunks.

For bulk loads: with the statement triggers on chunks disabled during a large COPY, one
INSERT ... SELECT into an index-less chunk_terms followed by the index builds is far cheaper than
maintaining two B-trees row by row. Postings get their impact from the rebuilt totals.
"""

from __future__ import annotations

import time

import asyncpg

TRIGGERS = ("chunks_bm25_insert", "chunks_bm25_update", "chunks_bm25_delete")

#: What a chunk's postings hold: its tsv and the names in its text (sql/030_identifier_terms.sql).
CHUNK_TERMS = "archivist_chunk_terms(tsv, context || ' ' || text)"
TOTALS_SQL = (
    "INSERT INTO bm25_totals (chunks, length) "
    f"SELECT count(*), coalesce(sum(tsvector_length({CHUNK_TERMS})), 0) FROM chunks"
)
POSTINGS_SQL = f"""
INSERT INTO chunk_terms (term, chunk_id, source_id, tf, dl, impact)
SELECT u.lexeme, c.id, c.source_id, coalesce(array_length(u.positions, 1), 1), c.dl,
       bm25_impact(coalesce(array_length(u.positions, 1), 1), c.dl, $1::float8)
FROM (SELECT id, source_id, terms, tsvector_length(terms) AS dl
      FROM (SELECT id, source_id, {CHUNK_TERMS} AS terms FROM chunks OFFSET 0) a) c, unnest(c.terms) u
"""
PKEY_SQL = "ALTER TABLE chunk_terms ADD CONSTRAINT chunk_terms_pkey PRIMARY KEY (term, chunk_id)"
IMPACT_INDEX_SQL = (
    "CREATE INDEX chunk_terms_impact_idx ON chunk_terms (term, impact DESC) INCLUDE (chunk_id, source_id)"
)


async def set_triggers(conn: asyncpg.Connection, enabled: bool) -> None:
    """Enable or disable the triggers that keep the postings in step with chunks (disabled, nothing
    is indexed: call `rebuild` before enabling them again)."""
    action = "ENABLE" if enabled else "DISABLE"
    for name in TRIGGERS:
        await conn.execute(f"ALTER TABLE chunks {action} TRIGGER {name}")


async def rebuild(conn: asyncpg.Connection, vacuum: bool = True) -> dict[str, float]:
    """Replace chunk_terms and bm25_totals with what chunks holds; returns seconds per step.

    Holds a SHARE lock on chunks (no writes meanwhile) and an exclusive one on chunk_terms (keyword
    searches wait) until the indexes are built. `vacuum` sets the visibility map afterwards, which the
    keyword leg's index-only scans need.
    """
    timings: dict[str, float] = {}

    def lap(name: str, started: float) -> float:
        now = time.perf_counter()
        timings[name] = round(now - started, 1)
        return now

    start = time.perf_counter()
    async with conn.transaction():
        await conn.execute("LOCK TABLE chunks IN SHARE MODE")
        await conn.execute("TRUNCATE chunk_terms, bm25_totals")
        await conn.execute("ALTER TABLE chunk_terms DROP CONSTRAINT IF EXISTS chunk_terms_pkey")
        await conn.execute("DROP INDEX IF EXISTS chunk_terms_impact_idx")
        await conn.execute(TOTALS_SQL)
        avgdl = await conn.fetchval("SELECT bm25_avgdl()")
        start = lap("totals_seconds", start)
        await conn.execute(POSTINGS_SQL, avgdl)
        start = lap("postings_seconds", start)
        await conn.execute(PKEY_SQL)
        start = lap("primary_key_seconds", start)
        await conn.execute(IMPACT_INDEX_SQL)
        start = lap("impact_index_seconds", start)
    if vacuum:
        await conn.execute("VACUUM (ANALYZE) chunk_terms")
        lap("vacuum_seconds", start)
    return timings
