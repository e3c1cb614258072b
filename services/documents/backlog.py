"""The embedding backlog: chunks are stored (and keyword-searchable) first, their vectors follow here.

A pending chunk is a row of `chunks` whose `embedding` is NULL (indexed by `chunks_pending_idx`), so
the backlog lives in PostgreSQL: it survives restarts and every server and worker shares it. A claim
locks a batch of pending rows (FOR UPDATE SKIP LOCKED) for one transaction that embeds them and
writes the vectors: two claimers never take the same chunk, and a claimer that dies (even kill -9)
rolls back, so its chunks are simply pending again. A vector is written only where there is none yet,
with `embedded_at`, so no chunk is embedded twice.

While a sync stores files in this process (`storing`), the background runner waits: on a small machine
the model's threads would take the cores the storing needs, and a sync embeds its own chunks (`drain`)
once every file is keyword-searchable (the Python standard library, 1,938 files: 379 s to store with
the runner embedding beside it).

Embedding goes through the model gate at document priority (`embed_documents_async`): a search's
query embedding always goes first. A claim holds its connection while the model works, so claims use
a small pool of their own (`CONNECTIONS`): however many ingestions embed at once, searches never wait
for a connection of the main pool. The texts are exactly what ingestion used to embed
(`embedding_text` of the document title, heading path and chunk text), so the vectors are the same.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from uuid import UUID

import asyncpg
import numpy as np

from services.core.database import Database
from services.documents.text import embedding_text
from services.embeddings import embed_documents_async
from services.embeddings.base import Embedder

logger = logging.getLogger(__name__)

BATCH = 32  # chunks per claim: one transaction holds them while the model embeds them (~1-2 s)
LANES = 2  # claims in flight per process: one embeds while the other writes and claims
POLL_SECONDS = 1.0  # how often an idle runner looks for work other processes queued
RETRY_SECONDS = 5.0  # after a failed batch (its chunks stay pending)
CONNECTIONS = 4  # claims in flight per process (the model gate, one slot per core, is the bottleneck)

CLAIM_SQL = """
SELECT c.id, c.text, c.heading_path, d.title FROM chunks c JOIN documents d ON d.id = c.document_id
WHERE c.embedding IS NULL AND ($2::uuid[] IS NULL OR c.document_id = ANY($2::uuid[]))
LIMIT $1 FOR UPDATE OF c SKIP LOCKED
"""
WRITE_SQL = """
UPDATE chunks c SET embedding = v.text::vector, embedded_at = clock_timestamp()
FROM unnest($1::uuid[], $2::text[]) AS v(id, text)
WHERE c.id = v.id AND c.embedding IS NULL
"""
PENDING_SQL = (
    "SELECT count(*) FROM chunks WHERE embedding IS NULL AND ($1::uuid[] IS NULL OR document_id = ANY($1::uuid[]))"
)


class EmbeddingBacklog:
    """Claims pending chunks, embeds them and writes their vectors; `run` is the background runner."""

    def __init__(self, db: Database, embedder: Embedder, batch: int = BATCH) -> None:
        self.db = db
        self.embedder = embedder
        self.batch = batch
        self.wakeup = asyncio.Event()  # set when this process stored chunks to embed
        self.embedded = 0  # chunks this process embedded
        self.stores = 0  # syncs storing files in this process now (the background runner waits)
        self.idle = asyncio.Event()  # set when none is
        self.idle.set()
        self._pool: asyncpg.Pool | None = None
        self._pool_lock = asyncio.Lock()

    async def _claims_pool(self) -> asyncpg.Pool:
        async with self._pool_lock:
            if self._pool is None:
                assert self.db.dsn is not None
                self._pool = await asyncpg.create_pool(self.db.dsn, min_size=0, max_size=CONNECTIONS)
            return self._pool

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    @contextmanager
    def storing(self) -> Iterator[None]:
        """While held, the background runner (`run`) claims nothing; `drain` is not held back."""
        self.stores += 1
        self.idle.clear()
        try:
            yield
        finally:
            self.stores -= 1
            if not self.stores:
                self.idle.set()

    async def embed_batch(self, document_ids: list[UUID] | None = None) -> int:
        """Claim up to `batch` pending chunks (of these documents, else any), embed and write them.
        Returns how many were embedded (0: nothing claimable right now)."""
        pool = await self._claims_pool()
        async with pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(CLAIM_SQL, self.batch, document_ids)
            if not rows:
                return 0
            texts = [embedding_text(r["title"], list(r["heading_path"]), r["text"]) for r in rows]
            vectors = await self._embed(texts)
            await conn.execute(WRITE_SQL, [r["id"] for r in rows], [vector_text(v) for v in vectors])
        self.embedded += len(rows)
        return len(rows)

    async def _embed(self, texts: list[str]) -> np.ndarray:
        """Vectors for `texts`; a text repeated in the batch (boilerplate across pages) is embedded once."""
        unique = list(dict.fromkeys(texts))
        distinct = await embed_documents_async(self.embedder, unique)
        if len(unique) == len(texts):
            return distinct
        row = {text: i for i, text in enumerate(unique)}
        return distinct[[row[text] for text in texts]]

    async def pending(self, document_ids: list[UUID] | None = None) -> int:
        return int(await self.db.pool.fetchval(PENDING_SQL, document_ids))

    async def drain(
        self, document_ids: list[UUID] | None = None, stop: asyncio.Event | None = None, lanes: int = LANES
    ) -> int:
        """Embed every pending chunk (of these documents, else all), waiting for chunks another claimer
        holds; returns early when `stop` is set. Returns how many this call embedded. `lanes` claims
        are in flight, so the model works while a claim's vectors are written (one lane: a directory
        ingest kept 74 % of the cores busy)."""
        if document_ids is not None and not document_ids:
            return 0
        try:
            async with asyncio.TaskGroup() as group:
                counts = [group.create_task(self._drain_lane(document_ids, stop)) for _ in range(max(1, lanes))]
        except BaseExceptionGroup as failed:  # callers map plain errors (a database fault: UNAVAILABLE)
            raise failed.exceptions[0] from None
        return sum(c.result() for c in counts)

    async def _drain_lane(self, document_ids: list[UUID] | None, stop: asyncio.Event | None) -> int:
        done = 0
        while stop is None or not stop.is_set():
            embedded = await self.embed_batch(document_ids)
            done += embedded
            if embedded:
                continue
            if not await self.pending(document_ids):
                break
            await wait_for(stop, 0.2)  # held by another claimer: its commit settles them
        return done

    async def run(self, stop: asyncio.Event, lanes: int = LANES) -> None:
        """The backlog runner (in the server and `archivist worker`): embed pending chunks until `stop`."""
        logger.info("embedding backlog runner started (%d lanes)", lanes)
        async with asyncio.TaskGroup() as group:
            for lane in range(lanes):
                group.create_task(self._lane(stop), name=f"embedding-backlog-{lane}")
        logger.info("embedding backlog runner stopped (%d chunks embedded)", self.embedded)

    async def _lane(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            if self.stores:
                await wait_for(stop, POLL_SECONDS, self.idle)
                continue
            try:
                embedded = await self.embed_batch()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database blinked, or the model failed: the chunks stay pending
                logger.warning("embedding backlog: batch failed (%s: %s); retrying", type(exc).__name__, exc)
                await wait_for(stop, RETRY_SECONDS)
                continue
            if not embedded:
                self.wakeup.clear()
                await wait_for(stop, POLL_SECONDS, self.wakeup)


def vector_text(vector: np.ndarray) -> str:
    """pgvector's text form; float32 values survive the round trip exactly."""
    return str(vector.tolist())


async def wait_for(stop: asyncio.Event | None, timeout: float, wakeup: asyncio.Event | None = None) -> None:
    """Sleep up to `timeout` seconds, or until `stop` (or `wakeup`) is set."""
    events = [e for e in (stop, wakeup) if e is not None]
    if not events:
        await asyncio.sleep(timeout)
        return
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
