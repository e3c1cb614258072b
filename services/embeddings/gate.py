"""Slots for model inference (embedder and reranker), one per core, searches first.

Model calls wait for a slot in priority order: a search's query embedding and reranking
(`QUERY`) go before document embeddings (`DOCUMENTS`), and document texts are embedded in slices of
`DOCUMENT_SLICE`, so a search waits behind at most one slice of a large ingest, update or crawl batch,
never behind the whole batch (nor behind more model calls than there are cores). Measured on 2 shared
cores (issue 10): batches larger than a few texts gained no throughput, while a 64-text call held the
CPU for 5 s; one slot in all halved the throughput of 50 agents' small embeddings.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from services.embeddings.models import cpu_threads

T = TypeVar("T")

QUERY = 0
DOCUMENTS = 1
DOCUMENT_SLICE = 4


class ModelGate:
    """A priority semaphore (default: one slot per core) whose holders run a function in a worker thread."""

    def __init__(self, slots: int | None = None) -> None:
        self.slots = slots or cpu_threads()
        self._busy = 0
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    @property
    def waiting(self) -> int:
        return sum(1 for _, _, f in self._waiters if not f.done())

    async def run(self, priority: int, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in a worker thread once a slot is free (lower `priority` first, then FIFO).
        The slot is held until the thread finishes, even if the caller is cancelled meanwhile."""
        await self._acquire(priority)
        try:
            work = asyncio.ensure_future(asyncio.to_thread(fn, *args))
        except BaseException:
            self._release()
            raise
        work.add_done_callback(lambda _: self._release())
        return await asyncio.shield(work)

    async def _acquire(self, priority: int) -> None:
        if self._busy < self.slots and not self.waiting:
            self._busy += 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (priority, next(self._order), turn))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # the slot was handed over just before the cancel
                self._release()
            raise

    def _release(self) -> None:
        while self._waiters:
            _, _, turn = heapq.heappop(self._waiters)
            if not turn.done():
                turn.set_result(None)  # the slot passes straight to the next waiter
                return
        self._busy -= 1


_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ModelGate] = weakref.WeakKeyDictionary()


def model_gate() -> ModelGate:
    """The gate of the running event loop (one per loop: tests run several loops in one process)."""
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = ModelGate()
    return gate


async def embed_in_slices(embed: Callable[[list[str]], np.ndarray], texts: list[str], dim: int) -> np.ndarray:
    """Document vectors for `texts` through the gate, `DOCUMENT_SLICE` texts (of similar length) a turn;
    rows follow the input order."""
    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
    out: np.ndarray | None = None
    gate = model_gate()
    for start in range(0, len(order), DOCUMENT_SLICE):
        picked = order[start : start + DOCUMENT_SLICE]
        vectors = await gate.run(DOCUMENTS, embed, [texts[i] for i in picked])
        if out is None:
            out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
        out[picked] = vectors
    assert out is not None
    return out
