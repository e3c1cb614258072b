"""A crawl's seed URLs from its start host's discovery files: the sitemaps (robots.txt's `Sitemap:`
lines and /sitemap.xml, sitemap indexes followed) and /llms.txt.

Each file is fetched like a page (services/net/text_fetch.py: every hop checked and pinned, the
crawl's login sent only to the hosts it names), at most MAX_SITEMAPS sitemaps and MAX_SEED_URLS URLs,
each read within its budget (services/core/budgets.py) in a worker thread, never on the event loop; a
sitemap over its budget (a DTD, too many or too deep elements) is left out with a warning.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from services.core.budgets import budget
from services.core.errors import OverBudget
from services.crawl.robots_cache import RobotsCache, site_root
from services.net.credentials import SiteCredentials
from services.net.robots import parse_llms_txt
from services.net.sitemap import parse_sitemap
from services.net.text_fetch import fetch_text
from services.net.urls import normalize_url

if TYPE_CHECKING:
    from services.core.settings import Settings

MAX_SITEMAPS = 10
MAX_SEED_URLS = 5000


async def discover(
    start_url: str, robots: RobotsCache, settings: Settings, login: SiteCredentials | None = None
) -> list[tuple[str, str]]:
    """(normalised URL, origin) of the pages the start host's sitemaps and /llms.txt list; origin is
    "sitemap" or "llms"."""
    root = site_root(start_url)
    policy = await robots.policy(start_url)
    queue = list(dict.fromkeys([*policy.sitemaps, root + "/sitemap.xml"]))
    found: list[tuple[str, str]] = []
    seen: set[str] = set()
    while queue and len(seen) < MAX_SITEMAPS and len(found) < MAX_SEED_URLS:
        sitemap_url = normalize_url(queue.pop(0))
        if sitemap_url is None or sitemap_url in seen:
            continue
        seen.add(sitemap_url)
        status, text = await fetch_discovery_file(sitemap_url, settings, login, "sitemap")
        if status == 200:
            try:
                pages, nested = await asyncio.to_thread(parse_sitemap, text, MAX_SEED_URLS - len(found))
            except OverBudget as exc:
                robots.warnings.append(f"Sitemap {sitemap_url[:200]} was not read: {exc.message}")
                continue
            found.extend((u, "sitemap") for u in pages)
            queue.extend(nested)
    llms_url = root + "/llms.txt"
    status, text = await fetch_discovery_file(llms_url, settings, login, "llms")
    if status == 200:
        found.extend((u, "llms") for u in await asyncio.to_thread(parse_llms_txt, text, llms_url))
    normalized = [(normalize_url(u), origin) for u, origin in found[:MAX_SEED_URLS]]
    return [(u, origin) for u, origin in normalized if u]


async def fetch_discovery_file(
    url: str, settings: Settings, login: SiteCredentials | None, kind: str
) -> tuple[int, str]:
    """A sitemap or llms.txt (`kind`), read up to its budget's bytes."""
    return await fetch_text(
        url,
        user_agent=settings.crawl_user_agent,
        timeout=settings.crawl_page_timeout,
        max_bytes=budget(kind).input_limit(),
        allow_private=settings.crawl_allow_private,
        login=login,
    )
