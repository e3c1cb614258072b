"""One embedding queue per crawl job: page ingestions ask for vectors, one consumer embeds whatever has
queued up in a single call, so batches span pages and the embedder runs back to back while the next
pages are fetched, extracted and chunked."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

import numpy as np

from services.embeddings.base import Embedder
from services.embeddings.gate import embed_in_slices

logger = logging.getLogger(__name__)

MAX_BATCH_TEXTS = 256  # one call embeds at most this many texts (pages are never split across calls)


@dataclass
class _Request:
    texts: list[str]
    future: asyncio.Future[np.ndarray] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class BatchingEmbedder(Embedder):
    """Wraps an embedder; `embed_documents_batched` coalesces concurrent requests into shared calls."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._queue: asyncio.Queue[_Request] | None = None
        self._consumer: asyncio.Task[None] | None = None
        self.calls = 0
        self.texts = 0
        self.duplicates = 0  # texts served from another copy in the same call
        self.busy_seconds = 0.0

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    async def embed_documents_batched(self, texts: list[str]) -> np.ndarray:
        """Vectors for `texts`, embedded together with whatever other pages asked for meanwhile."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._consumer = asyncio.create_task(self._consume(), name="embed-batcher")
        request = _Request(list(texts))
        await self._queue.put(request)
        return await request.future

    async def _consume(self) -> None:
        assert self._queue is not None
        while True:
            batch = [await self._queue.get()]
            size = len(batch[0].texts)
            while not self._queue.empty() and size + len(self._queue._queue[0].texts) <= MAX_BATCH_TEXTS:  # type: ignore[attr-defined]
                request = self._queue.get_nowait()
                batch.append(request)
                size += len(request.texts)
            await self._run(batch)

    async def _run(self, batch: list[_Request]) -> None:
        texts = [text for request in batch for text in request.texts]
        unique = list(dict.fromkeys(texts))  # a chunk repeated across pages (boilerplate) is embedded once
        began = time.perf_counter()
        try:
            distinct = await embed_in_slices(self.inner.embed_documents, unique, self.dim)  # searches go first
            row = {text: i for i, text in enumerate(unique)}
            vectors = distinct[[row[text] for text in texts]] if len(unique) < len(texts) else distinct
        except Exception as exc:  # every waiting page gets the error (and fails alone)
            for request in batch:
                if not request.future.done():
                    request.future.set_exception(exc)
            return
        finally:
            self.busy_seconds += time.perf_counter() - began
        self.calls += 1
        self.texts += len(texts)
        self.duplicates += len(texts) - len(unique)
        position = 0
        for request in batch:
            count = len(request.texts)
            if not request.future.done():
                request.future.set_result(vectors[position : position + count])
            position += count

    async def close(self) -> None:
        """Stop the consumer (pending requests are cancelled)."""
        if self._consumer is not None:
            self._consumer.cancel()
            await asyncio.gather(self._consumer, return_exceptions=True)
            self._consumer = None
        if self._queue is not None:
            while not self._queue.empty():
                self._queue.get_nowait().future.cancel()
            self._queue = None
        if self.calls:
            logger.info(
                "embedder: %d texts (%d duplicates) in %d calls, %.1f s busy",
                self.texts,
                self.duplicates,
                self.calls,
                self.busy_seconds,
            )
