"""Per-host and global request throttling for the crawler."""

from __future__ import annotations

import asyncio
import logging
import random
import time
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import asyncpg

from services.net.urls import host_key

logger = logging.getLogger(__name__)

DEFAULT_MAX_HOST_DELAY = 60.0
HOST_LOCK_NAMESPACE = 0x484F5354  # "HOST": first key of the per-host advisory locks
RESERVE_TURN_SQL = """
INSERT INTO crawl_hosts AS h (host, next_start) VALUES ($1, clock_timestamp() + make_interval(secs => $2))
ON CONFLICT (host) DO UPDATE
    SET next_start = greatest(h.next_start, clock_timestamp()) + make_interval(secs => $2)
RETURNING extract(epoch FROM h.next_start - make_interval(secs => $2) - clock_timestamp())::float8
"""


class SharedHostGate:
    """Per-host limits shared by every worker process on one database.

    Concurrency: a request to a host holds one of `per_host` session advisory locks keyed by the host
    (on a connection of the gate's own small pool; a dead worker's locks vanish with its connection).
    Delay: each request reserves its start time in `crawl_hosts` (one atomic upsert on the
    database's clock), so starts to one host are at least the delay apart across processes.
    """

    def __init__(self, dsn: str, max_connections: int, poll_seconds: float = 0.05) -> None:
        self._dsn = dsn
        self._max_connections = max_connections
        self._poll = poll_seconds
        self._pool: asyncpg.Pool | None = None
        self._pool_lock = asyncio.Lock()

    async def _get_pool(self) -> asyncpg.Pool:
        async with self._pool_lock:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(self._dsn, min_size=0, max_size=self._max_connections)
            return self._pool

    @staticmethod
    def lock_key(host: str) -> int:
        return zlib.crc32(host.encode()) - 2**31  # an int4, as pg_try_advisory_lock(int, int) takes

    @asynccontextmanager
    async def hold(self, host: str, per_host: int) -> AsyncIterator[asyncpg.Connection]:
        """Wait for one of the host's `per_host` shared slots and hold it (and its connection)."""
        pool = await self._get_pool()
        key = self.lock_key(host)
        async with pool.acquire() as conn:
            slot = await self._take_slot(conn, key, per_host)
            try:
                yield conn
            finally:
                await conn.execute("SELECT pg_advisory_unlock($1, $2)", key, slot)

    async def _take_slot(self, conn: asyncpg.Connection, key: int, per_host: int) -> int:
        while True:
            for slot in range(per_host):
                if await conn.fetchval("SELECT pg_try_advisory_lock($1, $2)", key, slot):
                    return slot
            await asyncio.sleep(self._poll * (0.5 + random.random()))

    @staticmethod
    async def wait_turn(conn: asyncpg.Connection, host: str, delay: float) -> None:
        """Reserve the host's next start time (`delay` after the previous one) and sleep until it."""
        if delay <= 0:
            return
        wait = await conn.fetchval(RESERVE_TURN_SQL, host, delay)
        if wait and wait > 0:
            await asyncio.sleep(wait)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


@dataclass
class _HostState:
    """Throttling state for one `scheme://host:port`."""

    slots: asyncio.Semaphore
    start_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_start: float | None = None
    robots_delay: float = 0.0


class HostThrottle:
    """Limits concurrent requests per host and overall, and spaces request starts per host.

    `async with throttle.slot(url):` waits until (1) fewer than `per_host_concurrency` requests to the
    URL's host are running, (2) at least the host's delay has passed since the START of the previous
    request to that host, and (3) fewer than `global_concurrency` requests are running overall. Start
    times per host are serialised, so the delay holds even when several requests to one host run at
    once. A request waiting out its host delay does not hold a global slot.
    """

    def __init__(
        self,
        per_host_concurrency: int,
        min_delay_seconds: float,
        global_concurrency: int,
        *,
        max_host_delay: float = DEFAULT_MAX_HOST_DELAY,
        shared: SharedHostGate | None = None,
    ) -> None:
        if per_host_concurrency < 1 or global_concurrency < 1:
            raise ValueError("concurrency limits must be at least 1")
        self._per_host = per_host_concurrency
        self._min_delay = max(0.0, min_delay_seconds)
        self._max_host_delay = max_host_delay
        self._global = asyncio.Semaphore(global_concurrency)
        self._hosts: dict[str, _HostState] = {}
        self._shared = shared

    def _state(self, key: str) -> _HostState:
        state = self._hosts.get(key)
        if state is None:
            state = self._hosts[key] = _HostState(slots=asyncio.Semaphore(self._per_host))
        return state

    @staticmethod
    def _key(host_or_url: str) -> str:
        return host_key(host_or_url) if "://" in host_or_url else host_or_url

    def set_host_delay(self, host: str, seconds: float | None) -> None:
        """Raise a host's delay, e.g. to robots.txt Crawl-delay (capped at `max_host_delay`).

        `host` is a URL or a `host_key`. The effective delay is the largest of this, the configured
        minimum and any per-call override; None or 0 removes the robots delay.
        """
        delay = min(max(0.0, seconds or 0.0), self._max_host_delay)
        if seconds and seconds > self._max_host_delay:
            logger.info("capping crawl delay for %s from %.1fs to %.1fs", host, seconds, delay)
        self._state(self._key(host)).robots_delay = delay

    def host_delay(self, host: str, delay_override: float | None = None) -> float:
        """The delay enforced between request starts to `host` (a URL or `host_key`)."""
        base = self._min_delay if delay_override is None else max(0.0, delay_override)
        return max(base, self._state(self._key(host)).robots_delay)

    async def _wait_for_turn(self, state: _HostState, delay: float) -> None:
        """Sleep until `delay` seconds have passed since the host's last request start."""
        if state.last_start is None:
            return
        remaining = state.last_start + delay - time.monotonic()
        if remaining > 0:
            await asyncio.sleep(remaining)

    @asynccontextmanager
    async def slot(self, url: str, delay_override: float | None = None) -> AsyncIterator[None]:
        """Hold a request slot for `url`; `delay_override` replaces the configured minimum delay.
        With a shared gate, the per-host limit and delay also hold across worker processes."""
        key = host_key(url)
        state = self._state(key)
        delay = self.host_delay(key, delay_override)
        async with state.slots, self._shared_slot(key) as shared_conn:
            async with state.start_lock:
                await self._wait_for_turn(state, delay)
                if shared_conn is not None:
                    await SharedHostGate.wait_turn(shared_conn, key, delay)
                await self._global.acquire()
                state.last_start = time.monotonic()
            try:
                yield
            finally:
                self._global.release()

    @asynccontextmanager
    async def _shared_slot(self, key: str) -> AsyncIterator[asyncpg.Connection | None]:
        if self._shared is None:
            yield None
            return
        async with self._shared.hold(key, self._per_host) as conn:
            yield conn

    async def close(self) -> None:
        if self._shared is not None:
            await self._shared.close()
