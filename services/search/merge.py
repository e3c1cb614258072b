"""Folding new keyword postings into their blocks, a worker chore (sql/042 `bm25_merge`).

Chunk writes append their postings to term_delta and list the postings of deleted chunks in
term_dead, so a crawl never rewrites a block. Every read is exact whatever the delta holds, but each
delta row is read in full by every search for its term, and each dead posting makes the reads of its
term go a little deeper. So every worker (the server's, `archivist worker`) folds them into blocks: when they reach
`bm25_merge_postings` rows, or when some are waiting and the last check found the same number (the
writes have paused). One merge runs at a time (an advisory lock); a bulk rebuild leaves none behind.
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

#: Rows waiting in term_delta and term_dead, counted up to `$1`.
WAITING_SQL = """
SELECT (SELECT count(*) FROM (SELECT 1 FROM term_delta LIMIT $1) d)
     + (SELECT count(*) FROM (SELECT 1 FROM term_dead LIMIT $1) x)
"""


class PostingsMerger:
    """Checks every `interval` seconds and merges when `threshold` rows wait, or writes have paused."""

    def __init__(self, db: Database, threshold: int, interval: float = 10.0) -> None:
        self.db = db
        self.threshold = threshold
        self.interval = interval
        self._last = 0

    async def waiting(self) -> int:
        return int(await self.db.pool.fetchval(WAITING_SQL, self.threshold))

    async def step(self) -> int:
        """One check; returns the postings folded in or dropped (0 when nothing was merged)."""
        waiting = await self.waiting()
        due = waiting >= self.threshold or (waiting > 0 and waiting == self._last)
        self._last = waiting
        if not due:
            return 0
        started = time.perf_counter()
        async with self.db.pool.acquire() as conn:
            folded = await bm25_index.merge(conn)
        self._last = 0
        if folded > 0:
            logger.info("keyword postings: merged %d into blocks in %.1fs", folded, time.perf_counter() - started)
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
