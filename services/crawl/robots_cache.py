"""robots.txt per host for one job (fetched once, Crawl-delay applied to the throttle)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from services.core.budgets import budget
from services.crawl.politeness import HostThrottle
from services.net.credentials import SiteCredentials
from services.net.robots import RobotsPolicy
from services.net.text_fetch import fetch_text
from services.net.urls import host_key

if TYPE_CHECKING:
    from services.core.settings import Settings


def site_root(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class RobotsCache:
    """robots.txt per host, fetched once per job; applies Crawl-delay to the throttle."""

    def __init__(
        self, settings: Settings, throttle: HostThrottle, warnings: list[str], login: SiteCredentials | None = None
    ) -> None:
        self.settings = settings
        self.login = login  # sent only to the hosts it names (see SiteCredentials.for_url)
        self.throttle = throttle
        self.warnings = warnings
        self._policies: dict[str, RobotsPolicy] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def policy(self, url: str) -> RobotsPolicy:
        key = host_key(url)
        async with self._locks.setdefault(key, asyncio.Lock()):
            if key not in self._policies:
                self._policies[key] = await self._load(url)
        return self._policies[key]

    async def _load(self, url: str) -> RobotsPolicy:
        robots_url = site_root(url) + "/robots.txt"
        status, text = await fetch_text(
            robots_url,
            user_agent=self.settings.crawl_user_agent,
            timeout=self.settings.crawl_page_timeout,
            max_bytes=budget("robots").input_limit() + 1,  # one byte more: a cut file is known as cut
            allow_private=self.settings.crawl_allow_private,
            login=self.login,
        )
        if status == 0:
            # No answer at all: the page fetches will fail with the real network error, so let them.
            policy = RobotsPolicy.allow_all()
        else:
            agent = self.settings.crawl_user_agent
            policy = await asyncio.to_thread(RobotsPolicy.from_response, status, text, agent)
            if policy.cut:
                self.warnings.append(
                    f"{robots_url} is over the robots budget (512 KiB, 10,000 rules): only its start is obeyed."
                )
            if status >= 500:
                self.warnings.append(f"{robots_url} answered HTTP {status}: the site is not crawled (RFC 9309).")
        self.throttle.set_host_delay(url, policy.crawl_delay)  # None clears a delay left by an earlier job
        return policy
