"""How wide the HNSW search looks, chosen from the collection's size (issue 37, recall at the defaults).

A fixed `hnsw.ef_search` loses recall as the graph grows: at 100 it finds ~0.99 of the true ten
nearest chunks among ten thousand but only 0.76 among a million (docs/performance.md). The vector
legs therefore run in a transaction that first sets `SET LOCAL hnsw.ef_search` to
`ef_search_for(chunks)`: the configured value (ARCHIVIST_HNSW_EF_SEARCH) as a floor, growing with the
square root of the number of chunks, capped so one query's cost stays bounded. The size is
`pg_class.reltuples` of `chunks` (kept by autovacuum and ANALYZE; an exact count only while the table
was never analysed), read at most once a minute. Filtered searches (one source, code only) rely on
the iterative index scans the pool's start-up settings enable (`hnsw.iterative_scan`,
services/core/database.py): the scan goes on until enough rows pass the filter.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from services.core.database import Database

#: ef_search = EF_PER_ROOT * sqrt(chunks): 100 up to 2,500 chunks, 283 at 20,000, 633 at 100,000, the
#: ceiling from 250,000. Measured (bench/scale.py, SciFact vectors copied with noise, halfvec, 200
#: queries against exact search): at 100,000 chunks recall@10 0.845 at ef_search 253 (0.8 * sqrt, the
#: first rule), 0.913 at 400, 0.963 at 600, 0.977 at 800 (vector p50 4.5 / 5.0 / 6.4 / 8.0 ms); at
#: 20,000, 0.976 at 114; at a million, 0.76 at 100 and 0.94 at 400.
EF_PER_ROOT = 2.0
#: No query looks wider than this (a query's HNSW work grows about linearly with ef_search).
EF_CEILING = 1000
REFRESH_SECONDS = 60.0
SIZE_SQL = (
    "SELECT CASE WHEN reltuples >= 0 THEN reltuples::bigint ELSE (SELECT count(*) FROM chunks) END "
    "FROM pg_class WHERE oid = 'chunks'::regclass"
)


def ef_search_for(chunks: int, floor: int) -> int:
    """The HNSW breadth for a collection of `chunks` vectors, never below `floor`."""
    wanted = math.ceil(EF_PER_ROOT * math.sqrt(max(chunks, 0)))
    return max(int(floor), min(EF_CEILING, wanted))


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

    async def ef_search(self) -> int:
        if time.monotonic() - self._read_at > REFRESH_SECONDS:
            self._chunks = int(await self.db.pool.fetchval(SIZE_SQL) or 0)
            self._read_at = time.monotonic()
        return ef_search_for(self._chunks, self.db.settings.hnsw_ef_search)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A connection inside a transaction whose hnsw.ef_search fits the collection."""
        ef = await self.ef_search()
        async with self.db.pool.acquire() as conn:
            # one round trip for both (a simple query may hold several statements), not three
            await conn.execute(f"BEGIN READ ONLY; SET LOCAL hnsw.ef_search = {int(ef)}")
            try:
                yield conn
            finally:
                await conn.execute("ROLLBACK")  # it read only: nothing to keep

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        async with self.connection() as conn:
            return list(await conn.fetch(sql, *args))
