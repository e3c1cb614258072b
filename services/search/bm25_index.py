"""Bulk (re)build of the BM25 postings (chunk_seqs, term_blocks, bm25_totals; sql/042) from chunks.

For bulk loads: with the statement triggers on chunks disabled during a large COPY, packing every
posting into blocks at once (sql/042 `bm25_rebuild`, the same function the migration converts an
existing knowledge base with) is far cheaper than appending each chunk's postings to the delta and
merging them. Postings get their impact from the rebuilt totals.
"""

from __future__ import annotations

import time

import asyncpg

TRIGGERS = ("chunks_bm25_insert", "chunks_bm25_update", "chunks_bm25_delete")
#: Postings per block (sql/042 `bm25_write_blocks`).
BLOCK_SIZE = 128


async def set_triggers(conn: asyncpg.Connection, enabled: bool) -> None:
    """Enable or disable the triggers that keep the postings in step with chunks (disabled, nothing
    is indexed: call `rebuild` before enabling them again)."""
    action = "ENABLE" if enabled else "DISABLE"
    for name in TRIGGERS:
        await conn.execute(f"ALTER TABLE chunks {action} TRIGGER {name}")


async def rebuild(conn: asyncpg.Connection, vacuum: bool = True) -> dict[str, float]:
    """Replace the postings and bm25_totals with what chunks holds; returns seconds per step.

    Holds a SHARE lock on chunks (no writes meanwhile) and exclusive ones on the postings tables
    (keyword searches wait) until the block index is built. `vacuum` sets the visibility map and
    the planner's statistics afterwards.
    """
    timings: dict[str, float] = {}
    start = time.perf_counter()
    async with conn.transaction():
        await conn.execute("LOCK TABLE chunks IN SHARE MODE")
        await conn.execute("SELECT bm25_rebuild($1)", BLOCK_SIZE)
    now = time.perf_counter()
    timings["postings_seconds"] = round(now - start, 1)
    if vacuum:
        await conn.execute("VACUUM (ANALYZE) chunk_seqs, term_blocks")
        timings["vacuum_seconds"] = round(time.perf_counter() - now, 1)
    return timings


async def merge(conn: asyncpg.Connection) -> int:
    """Fold the postings written and deleted since the last merge into blocks (sql/042 `bm25_merge`);
    returns how many, -1 when another merge is running."""
    async with conn.transaction():
        return int(await conn.fetchval("SELECT bm25_merge($1)", BLOCK_SIZE))
