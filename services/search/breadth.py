"""How wide the HNSW search looks, chosen from the collection's size (issue 37, recall at the defaults).

A fixed `hnsw.ef_search` loses recall as the graph grows: at 100 it finds ~0.99 of the true ten
nearest chunks among ten thousand but only 0.88 among a million (bench/scale_ef.py). The vector legs
therefore run in a transaction that first sets `SET LOCAL hnsw.ef_search` to `ef_search_for(chunks)`:
the configured value (ARCHIVIST_HNSW_EF_SEARCH) as a floor, growing with the square root of the
number of chunks, twice as wide for a filtered search (some sources, code only), capped so one
query's cost stays bounded. The size is `pg_class.reltuples` of `chunks` (kept by autovacuum and
ANALYZE; an exact count only while the table was never analysed), read at most once a minute.
Filtered searches rely on the iterative index scans the pool's start-up settings enable
(`hnsw.iterative_scan`, services/core/database.py): the scan goes on until enough rows pass the
filter, but each step looks only as wide as ef_search, and a tenth of the collection needed about
twice the breadth for the same recall.
"""

from __future__ import annotations

import logging
import math
import re
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from services.core.database import Database

logger = logging.getLogger(__name__)

#: ef_search = EF_PER_ROOT * sqrt(chunks), twice that filtered, with a margin over the lowest breadths
#: that reached recall@10 >= 0.95 against exact search (bench/scale_ef.py: SciFact's 9,732 passage
#: vectors copied with noise, 100 queries, 50 at a million; filtered to one of 10 sources). Lowest
#: passing of 40/100/200/300/400/500/600/800/1000, whole / filtered: 10,000 chunks 40 / 40; 30,000
#: 40 / 200 (100: 0.948); 100,000 40 / 200; 300,000 200 / 300 (100: 0.941, 200: 0.942); 1,000,000
#: 300 / 600 (0.956 / 0.954). That million's passing breadths are one HNSW graph's: a second build of
#: the same million found 0.942 at 400 whole, 0.976 at 800, 0.972 filtered at 800, 0.976 at 1000
#: (bench/scale.py), so the factor is twice the lowest passing one. The rule gives 100 / 200 up to
#: 15,625 chunks, 253 / 506 at 100,000, 439 / 878 at 300,000, 800 / 1000 at a million.
#: (The first rule, 2 * sqrt, came from 565 passages copied ~177 times.)
EF_PER_ROOT = 0.8
#: A filtered search (some sources, code documents only) looks this many times as wide.
FILTERED_FACTOR = 2
#: No query looks wider than this (a query's HNSW work grows about linearly with ef_search).
EF_CEILING = 1000
REFRESH_SECONDS = 60.0
#: How long a search waits for its second connection before running both legs on the first (a busy
#: pool must not deadlock searches that each hold one connection and wait for another).
SECOND_CONNECTION_SECONDS = 0.05
#: what `pg_export_snapshot()` returns (checked before it is written into SET TRANSACTION SNAPSHOT)
#: a transaction whose statements all read the snapshot it starts with (so it can be shared)
SNAPSHOT_BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
SNAPSHOT_ID = re.compile(r"[0-9A-Fa-f]+(-[0-9A-Fa-f]+)+")
SIZE_SQL = (
    "SELECT CASE WHEN reltuples >= 0 THEN reltuples::bigint ELSE (SELECT count(*) FROM chunks) END "
    "FROM pg_class WHERE oid = 'chunks'::regclass"
)


def ef_search_for(chunks: int, floor: int, filtered: bool = False) -> int:
    """The HNSW breadth for a collection of `chunks` vectors, never below `floor` (times
    FILTERED_FACTOR for a filtered search)."""
    wanted = max(int(floor), math.ceil(EF_PER_ROOT * math.sqrt(max(chunks, 0))))
    return min(EF_CEILING, wanted * (FILTERED_FACTOR if filtered else 1))


class SearchBreadth:
    """The collection size, cached, and the connection a vector leg runs on."""

    _of: weakref.WeakKeyDictionary[Database, SearchBreadth] = weakref.WeakKeyDictionary()

    def __init__(self, db: Database) -> None:
        self.db = db
        self._chunks = 0
        self._read_at = -math.inf

    @classmethod
    def of(cls, db: Database) -> SearchBreadth:
        """One per database, so every strategy shares the cached size."""
        found = cls._of.get(db)
        if found is None:
            found = cls._of[db] = cls(db)
        return found

    async def ef_search(self, filtered: bool = False) -> int:
        if time.monotonic() - self._read_at > REFRESH_SECONDS:
            self._chunks = int(await self.db.pool.fetchval(SIZE_SQL) or 0)
            self._read_at = time.monotonic()
        return ef_search_for(self._chunks, self.db.settings.hnsw_ef_search, filtered)

    @asynccontextmanager
    async def connection(self, filtered: bool = False) -> AsyncIterator[asyncpg.Connection]:
        """A connection inside a transaction whose hnsw.ef_search fits the collection (and the filter)."""
        ef = await self.ef_search(filtered)
        async with self.db.pool.acquire() as conn:
            # one round trip for both (a simple query may hold several statements), not three
            await conn.execute(f"BEGIN READ ONLY; SET LOCAL hnsw.ef_search = {int(ef)}")
            try:
                yield conn
            finally:
                await conn.execute("ROLLBACK")  # it read only: nothing to keep

    async def fetch(self, sql: str, *args: Any, filtered: bool = False) -> list[asyncpg.Record]:
        async with self.connection(filtered) as conn:
            return list(await conn.fetch(sql, *args))

    @asynccontextmanager
    async def shared_snapshot(
        self, filtered: bool = False
    ) -> AsyncIterator[tuple[asyncpg.Connection, asyncpg.Connection | None]]:
        """Two connections reading one snapshot (the first with the vector leg's ef_search), or the
        first and None when no second connection is free at once or the snapshot cannot be shared
        (a full disk): statements run on either see the
        same committed data, so legs run apart and fused afterwards never mix a document's old and
        new chunks, nor lose both to an update committed between them."""
        ef = await self.ef_search(filtered)
        begin = f"{SNAPSHOT_BEGIN}; SET LOCAL hnsw.ef_search = {int(ef)}"
        async with self.db.pool.acquire() as first:
            await first.execute(begin)
            try:
                snapshot = await _exported_snapshot(first, begin)
                second = await self._second_connection() if snapshot else None
                if second is None or snapshot is None:
                    yield first, None
                    return
                try:
                    await _import_snapshot(second, snapshot)
                    try:
                        yield first, second
                    finally:
                        await second.execute("ROLLBACK")
                finally:
                    await self.db.pool.release(second)
            finally:
                await first.execute("ROLLBACK")  # it read only: nothing to keep

    async def _second_connection(self) -> asyncpg.Connection | None:
        try:
            return await self.db.pool.acquire(timeout=SECOND_CONNECTION_SECONDS)
        except TimeoutError:
            logger.debug("no second connection free: the legs run one after the other")
            return None


async def _exported_snapshot(conn: asyncpg.Connection, begin: str) -> str | None:
    """The snapshot id of `conn`'s transaction, or None (the transaction begun anew) when PostgreSQL
    cannot write it: an export is a file in pg_snapshots, and a full disk must not stop searches."""
    try:
        return str(await conn.fetchval("SELECT pg_export_snapshot()"))
    except asyncpg.PostgresError as exc:
        logger.info("snapshot not exported (%s): the legs run one after the other", exc)
        await conn.execute(f"ROLLBACK; {begin}")
        return None


async def _import_snapshot(conn: asyncpg.Connection, snapshot: str) -> None:
    if SNAPSHOT_ID.fullmatch(snapshot) is None:
        raise ValueError(f"unexpected snapshot id {snapshot!r}")
    await conn.execute(f"{SNAPSHOT_BEGIN}; SET TRANSACTION SNAPSHOT '{snapshot}'")
