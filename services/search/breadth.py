"""How wide the HNSW search looks, chosen from the collection's size (issue 37, recall at the defaults).

A fixed `hnsw.ef_search` loses recall as the graph grows: at 100 it finds ~0.99 of the true ten
nearest chunks among ten thousand but only 0.88 among a million (bench/scale_ef.py). The vector legs
therefore run in a transaction that first sets `SET LOCAL hnsw.ef_search` to `ef_search_for(chunks)`:
the configured value (ARCHIVIST_HNSW_EF_SEARCH) as a floor, growing with the square root of the
number of chunks, at least twice the floor for a filtered search (some sources, code only), capped so one
query's cost stays bounded. The size is `pg_class.reltuples` of `chunks` (kept by autovacuum and
ANALYZE; an exact count only while the table was never analysed), read at most once a minute.
Filtered searches rely on the iterative index scans the pool's start-up settings enable
(`hnsw.iterative_scan`, services/core/database.py): the scan goes on until enough rows pass the
filter, but each step looks only as wide as ef_search: in a small collection a tenth of it needed
about twice the breadth for the same recall, at a million the same breadth as the whole.

A selective filter defeats the graph: filtered to a source of 1 % of a million chunks the iterative
scan ran 4 times as long as reading the source's chunks (231 against 59 ms, loaded) and still missed
some of the true ten; at 3 % it found 0.945 of them (bench/scale_filter.py). A search of sources
holding at most `exact_bound(chunks)` chunks, the smaller of `vector_exact_max_chunks` and
EXACT_SHARE of the collection, therefore scans them exactly (`small_scope`; the SQL in
services/search/vector.py). Their count is read, not taken from the planner's statistics (which call
a source crawled since the last ANALYZE empty: PostgreSQL then reads it exactly, however large),
counting no further than the bound, and kept a minute per set of sources.
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
from uuid import UUID

import asyncpg

from services.core.database import Database

logger = logging.getLogger(__name__)

#: ef_search = EF_PER_ROOT * sqrt(chunks), with a margin over the lowest breadths that reached
#: recall@10 >= 0.95 against exact search on 200 SciFact queries (SciFact's 9,732 passage vectors copied
#: with noise; bench/scale_ef.py on the first N chunks of a million, 10 sources, and the million
#: itself), whole / filtered to one source: 10,000 chunks 40 / 40; 30,000 40 / 150 (100: 0.949);
#: 100,000 40 / 200 (0.955); 300,000 100 / 200 (0.954 / 0.951); 1,000,000 400 / 400 (0.964 / 0.963;
#: 300: 0.939 / 0.939). The first 50 queries alone found 0.942 at 400 on the million, and the
#: passing breadth moves from one build of a graph to the next, so the rule sits above them: 100 up
#: to 40,000 chunks, 159 at 100,000, 274 at 300,000, 501 at a million (0.976 / 0.973, the leg's SQL
#: p50 37 -> 22 ms against the 0.8 rule's 801 / 1000 at load ~7), the ceiling from four million.
EF_PER_ROOT = 0.5
#: A filtered search (some sources, code only) looks at least FILTERED_FACTOR times the floor wide,
#: and FILTERED_PER_ROOT * sqrt(chunks) up to FILTERED_CAP: the iterative scan's first pass holds few
#: rows of a small source, so a tenth of a collection needed more breadth than the whole up to
#: 300,000 chunks (above), and the same at a million. The rule gives 200 up to 40,000 chunks, 317 at
#: 100,000 (0.977 at 300), 500 at 300,000 (0.983), the whole's 501 at a million (0.973).
FILTERED_FACTOR = 2
FILTERED_PER_ROOT = 1.0
FILTERED_CAP = 500
#: A filtered vector leg reads every chunk in scope when they are at most this share of the collection
#: (and at most `vector_exact_max_chunks`): at a million chunks, a source of 1 % scanned exactly took 59
#: ms against the graph's 231 (recall 1.0 against 0.963), one of 3 % 121 against 67 ms for the vector
#: search but 147 against 194 ms for the hybrid one, whose leg asks the graph for 100 rows (recall 1.0
#: against 0.945; bench/scale_filter.py, load ~6). In a smaller collection the same count is a larger
#: share, which the graph serves well and fast (0.98 at a tenth of 100,000 chunks).
EXACT_SHARE = 0.03
#: Sets of sources whose answer `small_scope` keeps (each for REFRESH_SECONDS).
SCOPE_CACHE_MAX = 1024
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
#: The searched sources' chunks, counted no further than $2: an index-only read of chunks_source_idx
#: that stops after $2 entries, whatever the sources' size (planner statistics would call a source
#: crawled since the last ANALYZE empty, and one just deleted large).
SCOPE_SIZE_SQL = "SELECT count(*) FROM (SELECT 1 FROM chunks WHERE source_id = ANY($1::uuid[]) LIMIT $2) s"


def exact_bound(chunks: int, most: int) -> int:
    """The most chunks a filtered vector leg scans exactly in a collection of `chunks` (0: never)."""
    return min(int(most), int(EXACT_SHARE * max(chunks, 0)))


def ef_search_for(chunks: int, floor: int, filtered: bool = False) -> int:
    """The HNSW breadth for a collection of `chunks` vectors, never below `floor` (a filtered search:
    never below twice it, nor below the whole collection's breadth)."""
    root = math.sqrt(max(chunks, 0))
    wanted = max(int(floor), math.ceil(EF_PER_ROOT * root))
    if filtered:
        wider = min(FILTERED_CAP, math.ceil(FILTERED_PER_ROOT * root))
        wanted = max(wanted, FILTERED_FACTOR * int(floor), wider)
    return min(EF_CEILING, wanted)


class SearchBreadth:
    """The collection size, cached, and the connection a vector leg runs on."""

    _of: weakref.WeakKeyDictionary[Database, SearchBreadth] = weakref.WeakKeyDictionary()

    def __init__(self, db: Database) -> None:
        self.db = db
        self._chunks = 0
        self._read_at = -math.inf
        self._scopes: dict[tuple[UUID, ...], tuple[float, bool]] = {}  # sources -> (read at, small)

    @classmethod
    def of(cls, db: Database) -> SearchBreadth:
        """One per database, so every strategy shares the cached size."""
        found = cls._of.get(db)
        if found is None:
            found = cls._of[db] = cls(db)
        return found

    async def chunks(self) -> int:
        """The collection's size, read at most once a minute."""
        if time.monotonic() - self._read_at > REFRESH_SECONDS:
            self._chunks = int(await self.db.pool.fetchval(SIZE_SQL) or 0)
            self._read_at = time.monotonic()
        return self._chunks

    async def ef_search(self, filtered: bool = False) -> int:
        return ef_search_for(await self.chunks(), self.db.settings.hnsw_ef_search, filtered)

    async def small_scope(self, source_ids: list[UUID] | None) -> bool:
        """Whether the sources hold so few chunks (`exact_bound`) that a vector leg over them scans them
        all exactly rather than walks the HNSW graph with a selective filter. Kept a minute: a source
        that grows past the bound meanwhile is scanned exactly (and slower) until the next count."""
        if source_ids is None:
            return False
        key = tuple(sorted(source_ids))
        kept = self._scopes.get(key)
        if kept is not None and time.monotonic() - kept[0] <= REFRESH_SECONDS:
            return kept[1]
        bound = exact_bound(await self.chunks(), self.db.settings.vector_exact_max_chunks)
        small = bound > 0 and int(await self.db.pool.fetchval(SCOPE_SIZE_SQL, source_ids, bound + 1)) <= bound
        if len(self._scopes) >= SCOPE_CACHE_MAX:
            self._scopes.clear()
        self._scopes[key] = (time.monotonic(), small)
        return small

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
