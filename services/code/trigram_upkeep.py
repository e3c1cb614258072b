"""Rebuilding grep's trigram index after large writes, a worker chore (sql/051).

The GIN over the line blocks' trigram arrays (sql/046) is maintained row by row as each file is stored
(through its pending list). Built that way it is ~2.4x the size of the same index built over the rows in
one pass (the stdlib subset: 6.0 vs 2.47 MB; the whole stdlib: 20.7 MB against ~8 MB), and its bloat
never goes away. So once the rows inserted since the last one-pass build reach REBUILD_FRACTION of the
table (at least MIN_BLOCKS) and writes have paused (the insert count is the same at two checks: a large
sync has stored its files), a worker rebuilds it with REINDEX CONCURRENTLY: the old index answers every
grep until the new one replaces it in one step, so grep stays indexed and exact meanwhile, and syncs
keep writing (both indexes take their rows). One rebuild at a time across workers (a session advisory
lock); an interrupted rebuild (a stop, a crash) leaves an invalid copy `..._ccnew`, which the next
holder of the lock drops before anything else (an invalid index still takes every insert).

The symbol tables' indexes grow with the same syncs, row by row as well (B-trees split half full, the
reference GINs through their pending lists), so the same rebuild gives them one pass too (the whole
stdlib: 10.0 -> 8.9 MB, names and files alike; issue 36's storage).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import asyncpg

from services.core.database import Database

logger = logging.getLogger(__name__)

INDEX = "code_blocks_words_idx"
#: rebuilt after it (sql/038, sql/049, sql/060): what definitions, outlines and references look up
SYMBOL_INDEXES = (
    "code_symbols_name_idx", "code_symbols_document_idx", "code_symbol_files_names_idx",
    "code_reference_files_names_idx",
)  # fmt: skip
REBUILD_FRACTION = 0.25  # rows inserted since the last build, as a part of the table's rows
MIN_BLOCKS = 2000  # ~8 MB of code: smaller syncs never rebuild
LOCK_SQL = "SELECT pg_try_advisory_lock(hashtextextended('code-trigram-rebuild', 0))"
UNLOCK_SQL = "SELECT pg_advisory_unlock(hashtextextended('code-trigram-rebuild', 0))"
#: inserts into code_blocks ever (cumulative statistics), its live rows, and the count at the last build
STATE_SQL = """
SELECT s.n_tup_ins AS inserted, s.n_live_tup AS live,
       (SELECT b.inserted FROM code_index_builds b WHERE b.index_name = $1) AS built
FROM pg_stat_user_tables s WHERE s.relid = 'code_blocks'::regclass
"""
LEFTOVERS_SQL = """
SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE NOT i.indisvalid AND c.relname LIKE $1 || '_ccnew%'
"""
RECORD_SQL = """
INSERT INTO code_index_builds (index_name, inserted) VALUES ($1, $2)
ON CONFLICT (index_name) DO UPDATE SET inserted = EXCLUDED.inserted, built_at = now()
"""


class TrigramUpkeep:
    """Checks every `interval` seconds; rebuilds once enough rows came in since the last build and the
    inserts have paused."""

    def __init__(
        self,
        db: Database,
        fraction: float = REBUILD_FRACTION,
        min_blocks: int = MIN_BLOCKS,
        interval: float = 10.0,
    ) -> None:
        self.db = db
        self.fraction = fraction
        self.min_blocks = min_blocks
        self.interval = interval
        self._last: int | None = None

    async def since_build(self) -> tuple[int, int, int]:
        """(rows inserted since the last build, live rows, the insert count now); a statistics reset
        (the count below the one recorded) counts every insert since the reset."""
        row = await self.db.pool.fetchrow(STATE_SQL, INDEX)
        if row is None:  # no statistics for the table (none kept): nothing to go by
            return 0, 0, 0
        inserted, live, built = int(row["inserted"]), int(row["live"]), row["built"]
        since = inserted - built if built is not None and built <= inserted else inserted
        return since, live, inserted

    async def step(self) -> bool:
        """One check; True when it rebuilt the index."""
        since, live, inserted = await self.since_build()
        due = since >= max(self.min_blocks, self.fraction * live) and inserted == self._last
        self._last = inserted
        return await self.rebuild() if due else False

    async def rebuild(self) -> bool:
        """REINDEX CONCURRENTLY the trigram index, then the symbol indexes (False: another worker holds the
        rebuild)."""
        async with self.db.pool.acquire() as conn:
            if not await conn.fetchval(LOCK_SQL):
                return False
            try:
                await drop_leftovers(conn)
                _, _, inserted = await self.since_build()  # rows inserted during the build are counted after
                started = time.perf_counter()
                await conn.execute("SET statement_timeout = 0")
                try:
                    await conn.execute(f"REINDEX INDEX CONCURRENTLY {INDEX}")
                    await conn.execute(RECORD_SQL, INDEX, inserted)
                    for name in SYMBOL_INDEXES:
                        await conn.execute(f"REINDEX INDEX CONCURRENTLY {name}")
                finally:
                    await conn.execute("RESET statement_timeout")
                logger.info("grep trigram index rebuilt in %.1fs", time.perf_counter() - started)
                return True
            finally:
                await conn.execute(UNLOCK_SQL)

    async def run(self, stop: asyncio.Event) -> None:
        """A worker chore (services/jobs/worker.py): check every `interval` seconds until `stop` is set."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)
            if stop.is_set():
                return
            try:
                await self.step()
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:  # grep stays exact meanwhile
                logger.warning("grep trigram index rebuild failed (tried again later): %s: %s", type(exc).__name__, exc)


async def drop_leftovers(conn: asyncpg.Connection) -> None:
    """Drop the invalid copies an interrupted rebuild left (called holding the rebuild lock)."""
    for name in (INDEX, *SYMBOL_INDEXES):
        for row in await conn.fetch(LEFTOVERS_SQL, name):
            logger.info("dropping %s, left by an interrupted index rebuild", row["relname"])
            await conn.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{row["relname"]}"')
