"""A small text fetcher for robots.txt, sitemaps and llms.txt, over a pinned client.

The crawl's discovery files are fetched like pages: every connection (the first URL and each of up
to MAX_REDIRECTS redirect hops) resolves once, is checked and goes to the checked address
(`services.net.connector`), so a discovery file cannot be pointed at a private address by a
redirect or by DNS rebinding. The crawl's page fetcher has the same rule; this one is smaller because
it only needs a status and a capped text.
"""

from __future__ import annotations

import logging

import httpx

from services.core.errors import ServiceError
from services.net.connector import pinned_client
from services.net.credentials import SiteCredentials
from services.net.safety import Resolver
from services.net.urls import normalize_url

logger = logging.getLogger(__name__)

MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
ACCEPT = "text/plain, text/markdown, application/xml, */*;q=0.5"


async def _read_capped(response: httpx.Response, max_bytes: int) -> bytes:
    """Read at most `max_bytes` of the body (the rest is dropped)."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body.extend(chunk)
        if len(body) >= max_bytes:
            logger.warning("truncated %s at %d bytes", response.url, max_bytes)
            break
    return bytes(body[:max_bytes])


async def fetch_text(
    url: str,
    *,
    user_agent: str,
    timeout: float,
    max_bytes: int,
    allow_private: bool,
    resolver: Resolver | None = None,
    login: SiteCredentials | None = None,
) -> tuple[int, str]:
    """GET a small text resource: (status, text), or (0, "") when refused, unreachable or looping.

    Redirects are followed (up to MAX_REDIRECTS), each hop checked when it connects; bodies longer
    than `max_bytes` are truncated. `resolver` replaces the DNS lookup (tests). `login`'s headers go
    only to the hosts it names, asked again on every hop.
    """
    headers = {"User-Agent": user_agent, "Accept": ACCEPT}
    current: str | None = url
    try:
        async with pinned_client(
            allow_private=allow_private, resolver=resolver, timeout=timeout, headers=headers
        ) as client:
            for _ in range(MAX_REDIRECTS + 1):
                if current is None:
                    logger.info("bad redirect fetching %s", url)
                    return 0, ""
                hop = login.for_url(current) if login else None
                async with client.stream("GET", current, headers=hop) as response:
                    location = response.headers.get("location")
                    if response.status_code in REDIRECT_STATUSES and location:
                        current = normalize_url(location, base=current)
                        continue
                    body = await _read_capped(response, max_bytes)
                    return response.status_code, body.decode(response.encoding or "utf-8", errors="replace")
    except (httpx.HTTPError, ServiceError, OSError, ValueError) as exc:
        logger.info("could not fetch %s: %s", url, getattr(exc, "message", exc))
        return 0, ""
    logger.info("too many redirects fetching %s", url)
    return 0, ""
