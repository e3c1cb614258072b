"""Folding new keyword postings into their blocks, a worker chore (sql/042 `bm25_merge`).

Chunk writes append their postings to term_delta and list the postings of deleted chunks in
term_dead, so a crawl never rewrites a block. Every read is exact whatever the delta holds, but each
delta row is read in full by every search for its term, and each dead posting makes the reads of its
term go a little deeper. So every worker (the server's, `archivist worker`) folds them into blocks: when
the writes have paused (nothing new at two checks), or when `bm25_merge_postings` wait, which bounds
what searches read from the delta. A merge rewrites every block its postings land in, so merging a
growing source often rewrites its blocks again and again: at 50,000 a whole-stdlib sync merged ~48 times,
a third of PostgreSQL's CPU during it (214,487 postings into a source holding 2.16 M: 15.7 s of CPU);
now a large sync waits for its pause (or the bound) and each block is written about once.
One merge runs at a time (an advisory lock); a bulk rebuild leaves none behind.

A merge deletes the rows it folds from term_delta, and a B-tree never gives back the pages of deleted
entries: after a large sync the delta's two indexes kept the size of its largest backlog (64 MB of a
knowledge base's keyword postings at a million chunks, with the delta empty). So when a merge leaves
the delta about empty and its indexes large, they are rebuilt (REINDEX CONCURRENTLY: chunk writes and
searches go on meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import asyncpg

from services.core.database import Database
from services.search import bm25_index

logger = logging.getLogger(__name__)

#: Rows waiting in term_delta and term_dead, each counted up to `$1`.
WAITING_SQL = """
SELECT (SELECT count(*) FROM (SELECT 1 FROM term_delta LIMIT $1) d)
     + (SELECT count(*) FROM (SELECT 1 FROM term_dead LIMIT $1) x)
"""
#: The rows waiting, from above, without reading them (a count of term_delta reads millions of rows
#: during a large sync): the unmerged chunks' lengths (a chunk's dl counts its lexemes' occurrences, and
#: it has a delta row per distinct lexeme, sql/042 bm25_add_chunks) through the index of unmerged
#: chunks, and term_dead's rows counted up to `$1` (0 only when nothing waits: a chunk without
#: lexemes has neither a length nor delta rows); and the last chunk numbered, so a write shows even
#: when it leaves the sum as it was. (Neither reads term_delta, whose dead rows after a large merge a
#: scan would wade through until vacuum.)
BACKLOG_SQL = """
SELECT (SELECT coalesce(sum(dl), 0) FROM chunk_seqs WHERE NOT merged)
     + (SELECT count(*) FROM (SELECT 1 FROM term_dead LIMIT $1) x) AS size,
       (SELECT coalesce(max(seq), 0) FROM chunk_seqs) AS last_seq
"""

#: term_delta's rows (counted up to `$1`) and its indexes' bytes.
DELTA_INDEXES_SQL = """
SELECT (SELECT count(*) FROM (SELECT 1 FROM term_delta LIMIT $1) d) AS rows, pg_indexes_size('term_delta') AS bytes
"""
#: Indexes of term_delta a failed REINDEX CONCURRENTLY left invalid (`*_ccnew`, `*_ccold`).
INVALID_DELTA_INDEXES_SQL = """
SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'term_delta'::regclass AND NOT i.indisvalid
"""
#: Rows of term_delta below which it counts as about empty, and its indexes' bytes per row past which,
#: beyond `DELTA_INDEX_SLACK`, they are rebuilt (a fresh entry takes ~40 bytes over the two).
DELTA_EMPTY_ROWS = 10_000
DELTA_INDEX_BYTES_PER_ROW = 64
DELTA_INDEX_SLACK = 8 << 20


async def shrink_delta_indexes(db: Database, slack: int = DELTA_INDEX_SLACK) -> bool:
    """Rebuild term_delta's indexes when the delta is about empty and they hold more than `slack` bytes
    over its rows (the pages of the rows merged away); returns whether they were rebuilt."""
    row = await db.pool.fetchrow(DELTA_INDEXES_SQL, DELTA_EMPTY_ROWS)
    if int(row["rows"]) >= DELTA_EMPTY_ROWS or int(row["bytes"]) <= slack + DELTA_INDEX_BYTES_PER_ROW * row["rows"]:
        return False
    started = time.perf_counter()
    async with db.pool.acquire() as conn:
        try:
            await conn.execute("REINDEX TABLE CONCURRENTLY term_delta")
        except asyncpg.PostgresError:  # an index left invalid would be written on every chunk insert
            for name in await conn.fetch(INVALID_DELTA_INDEXES_SQL):
                await conn.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name["relname"]}"')
            raise
    logger.info(
        "keyword postings: term_delta's indexes rebuilt (%d MB, %d rows) in %.1fs",
        int(row["bytes"]) >> 20,
        row["rows"],
        time.perf_counter() - started,
    )
    return True


async def restore_seq_keys(db: Database) -> None:
    """chunk_seqs' keys back if a rebuild that drops them (sql/058) stopped before adding them again (the
    keyword leg would scan chunk_seqs): when no rebuild or merge holds the lock, a no-op when they are there."""
    async with db.pool.acquire() as conn, conn.transaction():
        if await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", bm25_index.MERGE_LOCK):
            await conn.execute("SELECT bm25_index_seqs()")


class PostingsMerger:
    """Checks every `interval` seconds; merges when the writes pause or `threshold` rows wait."""

    def __init__(
        self, db: Database, threshold: int, interval: float = 10.0, delta_index_slack: int = DELTA_INDEX_SLACK
    ) -> None:
        self.db = db
        self.delta_index_slack = delta_index_slack
        self.threshold = threshold
        self.interval = interval
        self._last: tuple[int, int] = (0, 0)  # the backlog at the last check: (size, last chunk numbered)
        self._delta_checked = False  # whether term_delta's indexes were looked at since the start

    async def backlog(self) -> tuple[int, int, bool]:
        """(rows waiting from above, the last chunk numbered, whether any row waits)."""
        row = await self.db.pool.fetchrow(BACKLOG_SQL, self.threshold)
        return int(row["size"]), int(row["last_seq"]), int(row["size"]) > 0

    async def waiting(self) -> int:
        """Rows waiting, exactly up to `threshold` (reads them: for tests and benchmarks)."""
        return int(await self.db.pool.fetchval(WAITING_SQL, self.threshold))

    async def step(self) -> int:
        """One check; returns the postings folded in or dropped (0 when nothing was merged)."""
        if not self._delta_checked:  # indexes left large before this start (an earlier merge or release)
            self._delta_checked = True
            await shrink_delta_indexes(self.db, self.delta_index_slack)
            await restore_seq_keys(self.db)
        size, last_seq, waiting = await self.backlog()
        paused = (size, last_seq) == self._last
        self._last = (size, last_seq)
        if not waiting or not (paused or size >= self.threshold):
            return 0
        started = time.perf_counter()
        async with self.db.pool.acquire() as conn:
            folded = await bm25_index.merge(conn)
        self._last = (0, 0)
        if folded > 0:
            logger.info("keyword postings: merged %d into blocks in %.1fs", folded, time.perf_counter() - started)
            await shrink_delta_indexes(self.db, self.delta_index_slack)
        return max(folded, 0)

    async def run(self, stop: asyncio.Event) -> None:
        """A worker chore (services/jobs/worker.py): check every `interval` seconds until `stop` is set."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)
            if stop.is_set():
                return
            try:
                await self.step()
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:  # reads stay exact meanwhile
                logger.warning("keyword postings merge failed (tried again later): %s: %s", type(exc).__name__, exc)
