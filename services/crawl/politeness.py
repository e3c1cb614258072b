"""Per-host and global request throttling for the crawler."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from services.crawl.urls import host_key

logger = logging.getLogger(__name__)

DEFAULT_MAX_HOST_DELAY = 60.0


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
    ) -> None:
        if per_host_concurrency < 1 or global_concurrency < 1:
            raise ValueError("concurrency limits must be at least 1")
        self._per_host = per_host_concurrency
        self._min_delay = max(0.0, min_delay_seconds)
        self._max_host_delay = max_host_delay
        self._global = asyncio.Semaphore(global_concurrency)
        self._hosts: dict[str, _HostState] = {}

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
        """Hold a request slot for `url`; `delay_override` replaces the configured minimum delay."""
        key = host_key(url)
        state = self._state(key)
        delay = self.host_delay(key, delay_override)
        async with state.slots:
            async with state.start_lock:
                await self._wait_for_turn(state, delay)
                await self._global.acquire()
                state.last_start = time.monotonic()
            try:
                yield
            finally:
                self._global.release()
