"""Heavy formats are parsed in a worker process with memory, CPU-time and wall-time limits.

A pathological PDF, office file, YAML file or OpenAPI spec can make a parser allocate gigabytes or loop
for minutes. In a worker limited by RLIMIT_AS and RLIMIT_CPU that costs the worker, not the server: the
worker hits MemoryError or is killed by SIGXCPU, the caller gets a clear error, and the next call starts
a fresh pool. A task still running when its format's wall time (services/core/budgets.py) is over is stopped
by an alarm in its worker (timed from the task's start, not from its wait in the queue).
Which formats go to the worker is data: the `isolated` flag of their budget. Parsing never runs on the
event loop: light formats (text, markdown, HTML, CSV) run in a thread, under their budget's counters.
ZIP-based files are checked for bombs before a worker sees them.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import resource
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path, PurePath
from types import FrameType
from typing import Any, TypeVar

from services.core.budgets import Budget, budget
from services.core.errors import InvalidArgument, ServiceError, Unavailable
from services.core.settings import Settings
from services.parsers import REGISTRY, parse_bytes, parser_budget
from services.parsers.archives import check_archive
from services.parsers.base import ParsedDocument

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Formats parsed in the worker: those whose budget says `isolated`.
ISOLATED_EXTENSIONS = frozenset(
    extension for entry in REGISTRY if budget(entry.budget).isolated for extension in entry.extensions
)


def _limit_memory(memory_bytes: int) -> None:
    """Worker initializer: cap the address space (allocations past it raise MemoryError)."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def _run_limited(function: Callable[..., T], args: tuple[Any, ...], cpu_seconds: int, limits: Budget) -> T:
    """In the worker: allow `cpu_seconds` more CPU time (RLIMIT_CPU counts the whole life) and
    `limits.seconds` of wall time (an alarm raises OverBudget in the parser), then run."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = int(usage.ru_utime + usage.ru_stime) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (used + cpu_seconds, resource.RLIM_INFINITY))

    def out_of_time(signum: int, frame: FrameType | None) -> None:
        raise limits.over(f"parsing took longer than {limits.seconds:g} s")

    previous = signal.signal(signal.SIGALRM, out_of_time)
    signal.setitimer(signal.ITIMER_REAL, limits.seconds)
    try:
        return function(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _parse(data: bytes, name: str, max_file_bytes: int) -> ParsedDocument:
    return parse_bytes(data, Path(name), max_file_bytes)


class ParserPool:
    """A small, lazily started pool of limited parser workers, replaced whenever it breaks."""

    def __init__(self, workers: int, memory_mb: int, cpu_seconds: int) -> None:
        self.workers = max(1, workers)
        self.memory_mb = memory_mb
        self.cpu_seconds = cpu_seconds
        self._executor: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def _pool(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._executor is None:
                context = multiprocessing.get_context("forkserver")
                context.set_forkserver_preload(["services.parsers.isolation"])
                self._executor = ProcessPoolExecutor(
                    self.workers, context, initializer=_limit_memory, initargs=(self.memory_mb * 1024 * 1024,)
                )
            return self._executor

    def _discard(self, broken: ProcessPoolExecutor) -> None:
        """Drop a broken (or suspect) pool; the next call starts a fresh one."""
        with self._lock:
            if self._executor is broken:
                self._executor = None
        broken.shutdown(wait=False, cancel_futures=True)

    async def run(self, limits: Budget, name: str, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` in a worker under `limits` (its wall time; the pool's memory and CPU caps).
        Limits hit become ServiceErrors and never take the server down. `function` must be importable
        by the worker (a module-level function) and its arguments and result picklable."""
        executor = self._pool()
        cpu = max(1, min(self.cpu_seconds, int(limits.seconds)))
        try:
            # submitted from a thread: a submit may start a worker, and the first start waits for the
            # forkserver to start and import its preload (~0.5-2 s), which must not stop the event loop
            future = await asyncio.to_thread(executor.submit, _run_limited, function, args, cpu, limits)
            return await asyncio.wrap_future(future)
        except ServiceError:
            raise
        except MemoryError:
            self._discard(executor)
            raise InvalidArgument(
                f"{name} needs more than {self.memory_mb} MB of memory to parse.",
                "Split the file or convert it to text; or raise ARCHIVIST_PARSE_MEMORY_MB on the server.",
            ) from None
        except BrokenProcessPool:
            self._discard(executor)
            logger.warning("parser worker died on %s; starting a fresh pool", name)
            raise Unavailable(
                f"The parser worker stopped while parsing {name}: over the {cpu} s CPU "
                f"or {self.memory_mb} MB memory limit, or it crashed.",
                "Retry once (a fresh worker is started); if the same file fails again, convert it to "
                "text or PDF, or raise ARCHIVIST_PARSE_CPU_SECONDS / ARCHIVIST_PARSE_MEMORY_MB.",
            ) from None

    async def parse(self, data: bytes, path: PurePath, max_file_bytes: int) -> ParsedDocument:
        """Parse a file in a worker, under its format's budget."""
        limits = parser_budget(Path(path))
        return await self.run(limits, path.name, _parse, data, str(path), max_file_bytes)

    def close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


_pools: dict[tuple[int, int, int], ParserPool] = {}
_pools_lock = threading.Lock()


def parser_pool(settings: Settings) -> ParserPool:
    """The shared pool for these limits (settings: services.core.settings.Settings)."""
    key = (settings.parse_workers, settings.parse_memory_mb, settings.parse_cpu_seconds)
    with _pools_lock:
        if key not in _pools:
            _pools[key] = ParserPool(*key)
        return _pools[key]


async def parse_file(data: bytes, path: PurePath, settings: Settings) -> ParsedDocument:
    """Parse a file's bytes off the event loop: heavy formats in a limited worker, others in a thread."""
    check_archive(data, path, settings.max_file_bytes)  # here too: a bomb never reaches a worker
    if path.suffix.lower() in ISOLATED_EXTENSIONS:
        return await parser_pool(settings).parse(data, path, settings.max_file_bytes)
    return await asyncio.to_thread(parse_bytes, data, Path(path), settings.max_file_bytes)
