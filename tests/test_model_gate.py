"""Issue 10: model inference runs one call at a time, searches first: a query embedding overtakes a
large document embedding (which goes a few texts per turn), rows keep their order, cancellation is safe."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np

from services.embeddings import embed_documents_async, embed_query_async
from services.embeddings.gate import DOCUMENT_SLICE, DOCUMENTS, QUERY, ModelGate


async def test_a_query_overtakes_a_large_document_embedding(embedder: Any) -> None:
    texts = [f"Paragraph {i} on otters, kelp and tides. " * (10 + i % 7) for i in range(12 * DOCUMENT_SLICE)]
    documents = asyncio.create_task(embed_documents_async(embedder, texts))
    await asyncio.sleep(0.05)  # the first slice is running
    started = time.monotonic()
    query = await embed_query_async(embedder, "otters holding hands")
    waited = time.monotonic() - started
    assert not documents.done(), "the query waited for the whole document batch"
    vectors = await documents
    whole = time.monotonic() - started
    assert waited < whole / 3, (waited, whole)
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
