"""Slots for model inference (embedder and reranker), one per core, searches first.

Model calls wait for a slot in priority order: a search's query embedding and reranking
(`QUERY`) go before document embeddings (`DOCUMENTS`), and document texts are embedded in slices of
`DOCUMENT_SLICE`, so a search waits behind at most one slice of a large ingest, update or crawl batch,
never behind the whole batch (nor behind more model calls than there are cores). A batch's slices
run on up to one lane per slot, so one large ingest still uses every core.

Document embeddings run in worker threads of lower CPU priority (`nice`, Linux): when the cores are
short, the event loop serving requests, query embeddings and the database go first. Measured on 2
shared cores (issue 10, `bench/chaos.py --only swarm`): batches larger than a few texts gained no
throughput, while a 64-text call held the CPU for 5 s; one slot in all halved the throughput of 50
agents' small embeddings; without the lower priority, calls spent most of their time waiting for a core.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import os
import sys
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from services.embeddings.models import cpu_threads

logger = logging.getLogger(__name__)

T = TypeVar("T")

QUERY = 0
DOCUMENTS = 1
DOCUMENT_SLICE = 4
#: How much lower (`nice` steps) document embedding threads run; 0 keeps them at the server's priority.
background_nice = 10


def lower_thread_priority(steps: int) -> None:
    """Make the calling thread `steps` nice levels lower in CPU priority (Linux: nice is per thread)."""
    if steps <= 0 or not sys.platform.startswith("linux"):
        return
    try:
        os.setpriority(os.PRIO_PROCESS, 0, min(19, os.getpriority(os.PRIO_PROCESS, 0) + steps))
    except OSError as exc:  # e.g. a seccomp profile: run at normal priority
        logger.debug("could not lower a worker thread's priority: %s", exc)


class ModelGate:
    """A priority semaphore (default: one slot per core) whose holders run a function in a worker thread."""

    def __init__(self, slots: int | None = None) -> None:
        self.slots = slots or cpu_threads()
        self._busy = 0
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._background = ThreadPoolExecutor(
            self.slots, "embed-documents", initializer=lower_thread_priority, initargs=(background_nice,)
        )
        weakref.finalize(self, self._background.shutdown, wait=False)

    @property
    def waiting(self) -> int:
        return sum(1 for _, _, f in self._waiters if not f.done())

    async def run(self, priority: int, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in a worker thread once a slot is free (lower `priority` first, then FIFO);
        `DOCUMENTS` work in a lower-priority thread. The slot is held until the thread finishes, even
        if the caller is cancelled meanwhile."""
        await self._acquire(priority)
        try:
            if priority == DOCUMENTS:
                work = asyncio.get_running_loop().run_in_executor(self._background, fn, *args)
            else:
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
    """Document vectors for `texts` through the gate, `DOCUMENT_SLICE` texts (of similar length) a turn
    on up to one lane per slot (each batch queues at most that many turns, so batches interleave);
    rows follow the input order."""
    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
    slices = iter([order[start : start + DOCUMENT_SLICE] for start in range(0, len(order), DOCUMENT_SLICE)])
    out = np.empty((len(texts), dim), dtype=np.float32)
    gate = model_gate()

    async def lane() -> None:
        for picked in slices:  # shared by the lanes: each takes the next slice
            out[picked] = await gate.run(DOCUMENTS, embed, [texts[i] for i in picked])

    lanes = min(gate.slots, -(-len(texts) // DOCUMENT_SLICE))
    async with asyncio.TaskGroup() as group:
        for _ in range(lanes):
            group.create_task(lane())
    return out
