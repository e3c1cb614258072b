"""Issue 10: model inference runs one call per slot, searches first: a query embedding overtakes a
large document embedding (which goes a few texts per turn, on every slot), rows keep their order,
cancellation is safe, and document embeddings run at a lower CPU priority than the server."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from typing import Any

import numpy as np
import pytest

from services.embeddings import embed_documents_async, embed_query_async
from services.embeddings.gate import (
    DOCUMENT_SLICE,
    DOCUMENTS,
    QUERY,
    ModelGate,
    background_nice,
    embed_in_slices,
    model_gate,
)


class _SlicesServed:
    """The real embedder, counting the document slices it has embedded."""

    def __init__(self, embedder: Any) -> None:
        self.embedder, self.dim, self.served = embedder, embedder.dim, 0

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        vectors = self.embedder.embed_documents(texts)
        self.served += 1
        return vectors


async def test_a_query_overtakes_a_large_document_embedding(embedder: Any) -> None:
    texts = [f"Paragraph {i} on otters, kelp and tides. " * (10 + i % 7) for i in range(12 * DOCUMENT_SLICE)]
    counting = _SlicesServed(embedder)
    documents = asyncio.create_task(embed_documents_async(counting, texts))
    await asyncio.sleep(0.05)  # the first slice is running
    query = await embed_query_async(embedder, "otters holding hands")
    served_first = counting.served
    assert not documents.done(), "the query waited for the whole document batch"
    vectors = await documents
    # counted in slices, not seconds: on 2 busy cores one slice took half the batch's wall time; the query
    # waits at most for the slices already on the slots (and one started beside it), never the batch's 12
    assert counting.served == 12 and served_first <= model_gate().slots + 2, (served_first, counting.served)
    # Input order kept: each row matches its own text's vector (an int8 model quantizes per batch, so
    # other batch neighbours move the vectors a little) better than any other text's.
    similarity = vectors @ embedder.embed_documents(texts).T
    assert (np.diag(similarity) > 0.99).all() and (similarity.argmax(axis=1) == np.arange(len(texts))).all()
    assert float(query @ embedder.embed_query("otters holding hands")) > 0.99


async def test_priority_order_and_cancellation() -> None:
    gate = ModelGate(slots=1)
    order: list[str] = []
    release = asyncio.Event()
    loop = asyncio.get_running_loop()

    def hold() -> None:
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result()

    holder = asyncio.create_task(gate.run(DOCUMENTS, hold))
    await asyncio.sleep(0.05)
    waiting = [asyncio.create_task(gate.run(DOCUMENTS, order.append, f"doc{i}")) for i in range(3)]
    cancelled = asyncio.create_task(gate.run(QUERY, order.append, "cancelled query"))
    await asyncio.sleep(0.01)
    query = asyncio.create_task(gate.run(QUERY, order.append, "query"))
    await asyncio.sleep(0.01)
    cancelled.cancel()
    release.set()
    await asyncio.gather(holder, query, *waiting)
    assert order == ["query", "doc0", "doc1", "doc2"]
    assert cancelled.cancelled()
    assert await gate.run(QUERY, len, "free again") == 10  # the slot was not lost


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="nice is per thread on Linux only")
async def test_document_embeddings_run_at_lower_cpu_priority() -> None:
    def niceness() -> int:
        return os.getpriority(os.PRIO_PROCESS, 0)  # the calling thread's nice value on Linux

    server = niceness()
    gate = ModelGate(slots=2)
    assert await gate.run(DOCUMENTS, niceness) == min(19, server + background_nice)
    assert await gate.run(QUERY, niceness) == server
    assert niceness() == server  # the event loop's own thread is untouched


async def test_one_batch_uses_every_slot_and_leaves_turns_for_others() -> None:
    running, peak, finished = 0, 0, []
    lock = threading.Lock()

    def embed(texts: list[str]) -> np.ndarray:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        return np.array([[float(t.split()[-1])] for t in texts], dtype=np.float32)

    async def batch(name: str, size: int) -> np.ndarray:
        vectors = await embed_in_slices(embed, [f"text {i}" for i in range(size)], 1)
        finished.append(name)
        return vectors

    large = asyncio.create_task(batch("large", 40 * DOCUMENT_SLICE))
    await asyncio.sleep(0.05)
    small = await batch("small", 1)
    vectors = await large
    assert peak == model_gate().slots  # the large batch ran on every slot at once
    assert finished == ["small", "large"]  # and the small one got a turn in between
    assert vectors[:, 0].tolist() == list(range(40 * DOCUMENT_SLICE)) and small.tolist() == [[0.0]]
