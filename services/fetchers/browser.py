"""Browser fetcher: renders JavaScript pages with headless Chromium via crawl4ai's Playwright strategy.

Each URL is first fetched by `Crawl4aiHttpFetcher`, which owns the rules that a browser cannot
enforce well: SSRF checks on every redirect hop, conditional requests (304), 404/410, content type
and size limits. Only a 2xx HTML page is then rendered by the browser, at its final URL, and the HTTP
result is kept when rendering fails or yields nothing.

While it renders, Chromium has no network of its own: a route on the browser context
(`browser_guard.RequestGuard`) answers every request of the page (the document, scripts, XHR,
frames, each redirect hop) from the pinned, checked HTTP client, allows only http(s), and
`ISOLATION_FLAGS` make anything a route cannot see fail. Why not "check in the route, then let
Chromium continue": Chromium would resolve the name again and follow redirects without asking.

Chromium's sandbox is used unless this process runs as root: Chromium refuses to start sandboxed as
root, so there `--no-sandbox` is passed and a warning logged (run the worker as an ordinary user to
get the sandbox back). Network isolation does not depend on the sandbox.

crawl4ai launches a custom Chromium binary only in "managed browser" mode, which reads the
executable from `<crawl4ai home>/.crawl4ai/chromium.path`; that file is written from
`settings.crawl_browser_path`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import weakref
from typing import TYPE_CHECKING, Any

from services.fetchers.base import Fetcher, FetchResult
from services.fetchers.browser_guard import ISOLATION_FLAGS, RequestGuard
from services.fetchers.crawl4ai_http import HTML_TYPES, Crawl4aiHttpFetcher, fill_from_page, load_crawl4ai
from services.pages import extract_html

if TYPE_CHECKING:
    from services.core.settings import Settings
    from services.net.credentials import SiteCredentials

logger = logging.getLogger(__name__)

CHROMIUM_FLAGS = [
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-component-update",
    "--metrics-recording-only",
    "--no-first-run",
    "--mute-audio",
    *ISOLATION_FLAGS,
]
_STATUS_IN_ERROR = re.compile(r"\bHTTP (\d{3})\b")


def crawl_result_status(result: Any) -> int:
    """Normalise a crawl4ai CrawlResult's status: its status_code, else "HTTP 404" in the error, else 0."""
    status = getattr(result, "status_code", None)
    if isinstance(status, int) and status > 0:
        return status
    match = _STATUS_IN_ERROR.search(getattr(result, "error_message", "") or "")
    return int(match.group(1)) if match else 0


def sandbox_flags() -> list[str]:
    """Chromium's sandbox unless running as root (where Chromium will not start sandboxed)."""
    if os.geteuid() == 0:
        logger.warning("running as root: Chromium starts without its sandbox (run as a normal user to keep it)")
        return ["--no-sandbox"]
    os.environ["CRAWL4AI_CHROMIUM_SANDBOX"] = "true"  # crawl4ai adds --no-sandbox unless told otherwise
    return []


def _free_port() -> int:
    """An unused local TCP port for Chromium's DevTools endpoint."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class BrowserFetcher(Fetcher):
    """HTTP fetch first, then a headless Chromium render of HTML pages."""

    def __init__(self, settings: Settings, login: SiteCredentials | None = None) -> None:
        self._settings = settings
        self._http = Crawl4aiHttpFetcher(settings, login)
        load_crawl4ai()
        self._guard = RequestGuard(settings, login)
        self._guarded: weakref.WeakSet[Any] = weakref.WeakSet()
        self._crawler: Any = None
        self._start_lock = asyncio.Lock()

    def _browser_config(self) -> Any:
        from crawl4ai import BrowserConfig

        home = self._http.paths.base
        (home / ".crawl4ai").mkdir(parents=True, exist_ok=True)
        (home / ".crawl4ai" / "chromium.path").write_text(self._settings.crawl_browser_path)
        return BrowserConfig(
            browser_type="chromium",
            headless=True,
            use_managed_browser=True,
            debugging_port=_free_port(),
            user_data_dir=str(home / "browser-profile"),
            user_agent=self._settings.crawl_user_agent,
            ignore_https_errors=False,
            accept_downloads=False,
            downloads_path=str(self._http.paths.downloads),
            verbose=False,
            extra_args=[*CHROMIUM_FLAGS, *sandbox_flags()],
        )

    async def _guard_requests(self, page: Any, context: Any = None, **_: Any) -> Any:
        """crawl4ai hook: every request of the context is answered (or aborted) by the request guard."""
        context = context or page.context
        if context not in self._guarded:
            await context.route("**/*", self._guard.handle)
            self._guarded.add(context)
        return page

    async def _crawler_instance(self) -> Any:
        async with self._start_lock:
            if self._crawler is None:
                from crawl4ai import AsyncWebCrawler

                crawler = AsyncWebCrawler(config=self._browser_config(), base_directory=str(self._http.paths.base))
                crawler.crawler_strategy.set_hook("on_page_context_created", self._guard_requests)
                await crawler.start()
                self._crawler = crawler
            return self._crawler

    async def _render(self, url: str) -> Any:
        from crawl4ai import CacheMode, CrawlerRunConfig

        config = CrawlerRunConfig(
            cache_mode=CacheMode.BYPASS,
            page_timeout=int(self._settings.crawl_page_timeout * 1000),
            verbose=False,
        )
        crawler = await self._crawler_instance()
        return await crawler.arun(url, config=config)

    async def fetch(self, url: str, *, etag: str | None = None, last_modified: str | None = None) -> FetchResult:
        """HTTP result, with markdown/title/links replaced by the rendered page's (same page pipeline)."""
        result = await self._http.fetch(url, etag=etag, last_modified=last_modified)
        if not result.ok or result.content_type not in HTML_TYPES:
            return result
        try:
            rendered = await self._render(result.final_url)
        except Exception as exc:  # a browser failure falls back to the HTTP result
            logger.warning("browser render failed for %s: %s", result.final_url, exc)
            return result
        status = crawl_result_status(rendered)
        html = getattr(rendered, "html", "") or ""
        page = await asyncio.to_thread(extract_html, html, result.final_url) if html.strip() else None
        if not (200 <= status < 300) or page is None or not page.markdown.strip():
            logger.info("browser render of %s gave status %s; keeping HTTP result", result.final_url, status)
            return result
        links = page.links or result.links
        title = page.title or result.title
        fill_from_page(result, page)
        result.links, result.title = links, title
        return result

    async def close(self) -> None:
        """Stop the browser and the HTTP client."""
        if self._crawler is not None:
            await self._crawler.close()
            self._crawler = None
        await self._guard.close()
        await self._http.close()
