"""Fetchers: one URL in, a page's markdown, links and cache validators out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from services.fetchers.base import Fetcher, FetchResult

if TYPE_CHECKING:
    from services.core.settings import Settings
    from services.net.credentials import SiteCredentials

__all__ = ["FetchResult", "Fetcher", "create_fetcher"]


def create_fetcher(settings: Settings, login: SiteCredentials | None = None) -> Fetcher:
    """The configured fetcher: headless Chromium when `crawl_browser` is set, plain HTTP otherwise.
    `login` (a crawl behind a login) adds its headers to the requests for the hosts it names.

    Imports lazily so crawl4ai's home directory is set (inside `data_dir`) before crawl4ai loads.
    """
    if settings.crawl_browser:
        from services.fetchers.browser import BrowserFetcher

        return BrowserFetcher(settings, login)
    from services.fetchers.crawl4ai_http import Crawl4aiHttpFetcher

    return Crawl4aiHttpFetcher(settings, login)
