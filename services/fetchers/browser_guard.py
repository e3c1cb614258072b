"""The browser's network: every request a rendered page makes is served by the pinned HTTP client.

Checking a request's URL in a Playwright route and then letting Chromium continue it is not enough:
Chromium resolves the name again (DNS rebinding) and follows redirects itself without calling the
route again (so a subresource could redirect to 169.254.169.254). So Chromium never connects
anywhere here. `RequestGuard.handle` is a Playwright route for the whole browser context: it aborts
anything that is not http(s), fetches http(s) requests itself through `pinned_client` (each
connection resolved once, checked, connected to the checked address; redirects followed here, each
hop checked; bodies capped) and answers the browser with `route.fulfill`. A crawl behind a login adds
its headers here, per hop, only for the hosts they belong to; the page never sees them.

Requests a route cannot see (WebSockets, WebRTC, a service worker's own fetches) must not reach the
network either: `ISOLATION_FLAGS` point Chromium at a proxy that does not exist, make its own DNS
resolve nothing and keep WebRTC off UDP. Chromium's sandbox is on unless the process runs as root,
where Chromium refuses to start sandboxed (see `BrowserFetcher`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

import httpx

from services.core.errors import ServiceError
from services.net.connector import pinned_client
from services.net.safety import ALLOWED_SCHEMES

if TYPE_CHECKING:
    from services.core.settings import Settings
    from services.net.credentials import SiteCredentials

logger = logging.getLogger(__name__)

MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Chromium's own networking is a dead end: anything not answered by the route fails.
ISOLATION_FLAGS = [
    "--proxy-server=http://127.0.0.1:9",  # discard port: nothing listens, nothing is proxied
    "--proxy-bypass-list=<-loopback>",  # no implicit direct connections to loopback either
    "--host-resolver-rules=MAP * ~NOTFOUND",  # and no DNS of its own
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
]
# Hop-by-hop and encoding headers are not passed on: httpx already decoded the body it hands over.
_DROP_REQUEST = frozenset({"host", "connection", "content-length", "accept-encoding", "transfer-encoding", "cookie"})
_DROP_RESPONSE = frozenset({"content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive"})


def with_login(headers: dict[str, str], login: dict[str, str]) -> dict[str, str]:
    """The page's headers with the login's added (replacing any of the same name, in any case)."""
    names = {name.lower() for name in login}
    return {**{k: v for k, v in headers.items() if k.lower() not in names}, **login}


class BlockedRequest(Exception):
    """The request may not be made (scheme, address, size); the message says why."""


class RequestGuard:
    """A Playwright route handler that answers every page request from a pinned, checked client."""

    def __init__(self, settings: Settings, login: SiteCredentials | None = None) -> None:
        self._settings = settings
        self._login = login
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = pinned_client(
                allow_private=self._settings.crawl_allow_private,
                timeout=httpx.Timeout(self._settings.crawl_page_timeout),
                headers={"User-Agent": self._settings.crawl_user_agent},
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def handle(self, route: Any) -> None:
        """Route callback: fulfil the request from the pinned client, or abort it."""
        request = route.request
        try:
            status, headers, body = await self.fetch(
                request.method, request.url, dict(request.headers), request.post_data_buffer
            )
        except BlockedRequest as exc:
            logger.info("browser request blocked: %s", exc)
            await route.abort("blockedbyclient")
            return
        except (httpx.HTTPError, OSError, ValueError) as exc:
            logger.info("browser request failed: %s %s", request.url, exc)
            await route.abort("failed")
            return
        await route.fulfill(status=status, headers=headers, body=body)

    async def fetch(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None
    ) -> tuple[int, dict[str, str], bytes]:
        """Make the request (following redirects, each hop checked): status, headers, capped body."""
        sent = {k: v for k, v in headers.items() if k.lower() not in _DROP_REQUEST}
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            if urlsplit(current).scheme.lower() not in ALLOWED_SCHEMES:
                raise BlockedRequest(f"not an http(s) URL: {current[:200]}")
            try:
                hop = with_login(sent, self._login.for_url(current)) if self._login else sent
                async with self._http().stream(method, current, headers=hop, content=body) as response:
                    location = response.headers.get("location")
                    if response.status_code in REDIRECT_STATUSES and location:
                        current = urljoin(current, location)
                        if response.status_code == 303 or method == "POST" and response.status_code in (301, 302):
                            method, body = "GET", None
                        continue
                    data = await self._read_capped(response)
                    kept = {k: v for k, v in response.headers.items() if k.lower() not in _DROP_RESPONSE}
                    return response.status_code, kept, data
            except ServiceError as exc:
                raise BlockedRequest(exc.message) from exc
        raise BlockedRequest(f"too many redirects: {url[:200]}")

    async def _read_capped(self, response: httpx.Response) -> bytes:
        limit = self._settings.crawl_max_page_bytes
        data = bytearray()
        async for chunk in response.aiter_bytes():
            data.extend(chunk)
            if len(data) > limit:
                raise BlockedRequest(f"response over crawl_max_page_bytes ({limit}): {response.url}")
        return bytes(data)
