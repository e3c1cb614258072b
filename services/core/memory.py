"""Keeps the server's resident memory bounded over a long crawl or ingestion (glibc malloc, Linux).

Measured on a 2,000-page crawl (docs/performance.md, "Memory"): Python's own heap stays small, but
glibc gives each thread that allocates its own malloc arena (up to 8 per core), and the page
pipeline, the parsers and the model each run in worker threads. Memory freed in one arena is
not reused by the others and is rarely handed back to the system, so resident memory crept up with
every page. Two things bound it:

- `limit_malloc_arenas()`, once at start-up (`Archivist.open`): at most `MALLOC_ARENAS` arenas,
  unless the operator set MALLOC_ARENA_MAX (then glibc already follows it);
- `trim()` (malloc_trim), every `TRIM_EVERY` pages of a crawl (`Trimmer`) and when it ends: free
  pages inside the arenas go back to the system. A trim of a few hundred MB took ~25 ms, so callers
  on the event loop run it in a thread (`trim_async`).

Both are no-ops where glibc is not the allocator (musl, macOS).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
import sys
from functools import cache

logger = logging.getLogger(__name__)

M_ARENA_MAX = -8  # mallopt parameter (malloc.h)
MALLOC_ARENAS = 2
TRIM_EVERY = 50  # pages between two trims of a crawl (a trim takes a few milliseconds)


@cache
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.mallopt  # noqa: B018 - glibc only
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas (threads created afterwards share them). False if not applied."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    libc = _libc()
    if libc is None:
        return False
    applied = bool(libc.mallopt(M_ARENA_MAX, arenas))
    logger.debug("malloc arenas capped at %d: %s", arenas, applied)
    return applied


def trim() -> bool:
    """Hand the free memory of every malloc arena back to the system. True if any was released."""
    libc = _libc()
    return bool(libc.malloc_trim(0)) if libc is not None else False


async def trim_async() -> bool:
    """`trim()` in a worker thread (malloc_trim releases the GIL), so the event loop never waits on it."""
    return await asyncio.to_thread(trim)


class Trimmer:
    """Trims once every `every` ticks (e.g. pages stored)."""

    def __init__(self, every: int = TRIM_EVERY) -> None:
        self.every = max(1, every)
        self._ticks = 0

    async def tick(self, count: int = 1) -> None:
        self._ticks += count
        if self._ticks >= self.every:
            self._ticks = 0
            await trim_async()
