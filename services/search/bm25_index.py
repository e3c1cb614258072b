"""Bulk (re)build of the BM25 postings (chunk_seqs, term_blocks, bm25_totals; sql/042) from chunks.

For bulk loads: with the statement triggers on chunks disabled during a large COPY, packing every
posting into blocks at once (sql/042 `bm25_rebuild`, the same function the migration converts an
existing knowledge base with) is far cheaper than appending each chunk's postings to the delta and
merging them. Postings get their impact from the rebuilt totals. `rebuild_parallel` splits the terms
among several connections (sql/052), for a bulk load on more than one core.
"""

from __future__ import annotations

import asyncio
import itertools
import time

import asyncpg

TRIGGERS = ("chunks_bm25_insert", "chunks_bm25_update", "chunks_bm25_delete")
#: Postings per block (sql/042 `bm25_write_blocks`).
BLOCK_SIZE = 128
#: The advisory lock bm25_merge tries and bm25_rebuild holds (sql/042).
MERGE_LOCK = 1112354102


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


async def rebuild_parallel(
    pool: asyncpg.Pool, parts: int, vacuum: bool = True, block_size: int = BLOCK_SIZE
) -> dict[str, float]:
    """`rebuild` on `parts` connections of `pool` at once (sql/052): chunk_seqs split by ranges of the
    chunks' pages, then the blocks by term; the same rows, in about 1/parts of the time given the cores.

    For bulk loads: the steps commit one by one, so a keyword search meanwhile sees part of the postings,
    and a failure leaves them incomplete (run it again). Throughout, one more connection holds the merge
    lock and a SHARE lock on chunks (no writes), so the postings are those of one state of chunks.
    """
    if parts < 1:
        raise ValueError(f"parts must be at least 1, not {parts}")
    timings: dict[str, float] = {}
    start = time.perf_counter()
    async with pool.acquire() as hold, hold.transaction():
        await hold.execute("SELECT pg_advisory_xact_lock($1)", MERGE_LOCK)
        await hold.execute("LOCK TABLE chunks IN SHARE MODE")
        async with pool.acquire() as conn:
            await conn.execute("SELECT bm25_rebuild_clear()")
            end = await conn.fetchval("SELECT bm25_chunk_pages_end()")
        pages = list(itertools.pairwise(end * part // parts for part in range(parts + 1)))
        counts = await _each(pool, [("SELECT bm25_chunks_in_pages($1, $2)", *p) for p in pages])
        seqs_sql = "SELECT bm25_rebuild_seqs_part($1, $2, $3)"
        await _each(pool, [(seqs_sql, *p, 1 + sum(counts[:i])) for i, p in enumerate(pages)])
        async with pool.acquire() as conn:
            avgdl = await conn.fetchval("SELECT bm25_rebuild_totals()")
        timings["seqs_seconds"] = round(time.perf_counter() - start, 1)
        part_sql = "SELECT bm25_rebuild_part($1, $2, $3, $4)"
        await _each(pool, [(part_sql, block_size, avgdl, part, parts) for part in range(parts)])
        async with pool.acquire() as conn:
            await conn.execute("SELECT bm25_index_blocks()")
    now = time.perf_counter()
    timings["postings_seconds"] = round(now - start, 1)
    if vacuum:
        async with pool.acquire() as conn:
            await conn.execute("VACUUM (ANALYZE) chunk_seqs, term_blocks")
        timings["vacuum_seconds"] = round(time.perf_counter() - now, 1)
    return timings


async def _each(pool: asyncpg.Pool, calls: list[tuple]) -> list:
    """Each (sql, *args) on a connection of its own, all at once; their first values, in order. One
    failing cancels the others."""

    async def call(sql: str, *args: object) -> object:
        async with pool.acquire() as conn:
            return await conn.fetchval(sql, *args)

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(call(*c)) for c in calls]
    return [task.result() for task in tasks]


async def merge(conn: asyncpg.Connection) -> int:
    """Fold the postings written and deleted since the last merge into blocks (sql/042 `bm25_merge`);
    returns how many, -1 when another merge is running."""
    async with conn.transaction():
        return int(await conn.fetchval("SELECT bm25_merge($1)", BLOCK_SIZE))
