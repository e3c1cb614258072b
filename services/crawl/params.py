"""Crawl parameters checked before a job is queued: the start URL, limits, path patterns, login
references (services/net/credentials.py), the default title."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from models.jobs import CrawlParams, CrawlRequest
from services.core.errors import InvalidArgument
from services.core.validation import check_patterns
from services.net import credentials
from services.net.urls import normalize_url

if TYPE_CHECKING:
    from services.core.settings import Settings

SCOPES = ("same-host", "same-domain", "under-path")


def default_source_title(url: str) -> str:
    """The source title for a crawl started without one: the URL's host (and port, if any)."""
    return urlsplit(url).netloc or url


def check_start_url(url: str | None) -> str:
    """The normalised http(s) start URL, or InvalidArgument."""
    if not url or not url.strip():
        raise InvalidArgument("url is required to start a crawl.", "Pass url='https://example.com/docs/'.")
    scheme = urlsplit(url.strip()).scheme.lower()
    normalized = normalize_url(url)
    if scheme not in ("http", "https") or normalized is None:
        raise InvalidArgument(
            f"Invalid crawl URL: {url[:200]}", "Only absolute http:// and https:// URLs can be crawled."
        )
    return normalized


def build_params(settings: Settings, request: CrawlRequest) -> tuple[CrawlParams, list[str]]:
    """Check a crawl request (what it leaves out takes CrawlParams' defaults); returns the parameters and
    notes about limits that were applied.

    Headers and cookies must be `env:NAME` references, and every referenced variable must be set now.
    """
    start_url = check_start_url(request.url)
    defaults = CrawlParams(url=start_url)
    notes: list[str] = []
    max_pages = defaults.max_pages if request.max_pages is None else request.max_pages
    if max_pages < 1:
        raise InvalidArgument(f"max_pages must be 1 or more (got {max_pages}).", "Use max_pages=20, for example.")
    if max_pages > settings.crawl_max_pages:
        notes.append(f"max_pages {max_pages} was capped at {settings.crawl_max_pages} (ARCHIVIST_CRAWL_MAX_PAGES).")
        max_pages = settings.crawl_max_pages
    max_depth = defaults.max_depth if request.max_depth is None else request.max_depth
    if max_depth < 0:
        raise InvalidArgument(f"max_depth must be 0 or more (got {max_depth}).", "Use max_depth=2, for example.")
    if max_depth > settings.crawl_max_depth:
        notes.append(f"max_depth {max_depth} was capped at {settings.crawl_max_depth}.")
        max_depth = settings.crawl_max_depth
    scope = request.scope or defaults.scope
    if scope not in SCOPES:
        raise InvalidArgument(f"Invalid scope '{scope}'.", f"Use one of: {', '.join(SCOPES)}.")
    header_refs, cookie_refs, hosts = credentials.check_references(request.headers, request.cookies, request.auth_hosts)
    credentials.resolve(start_url, header_refs, cookie_refs, hosts)  # a missing variable: say so now
    params = CrawlParams(
        url=start_url,
        recursive=defaults.recursive if request.recursive is None else request.recursive,
        max_depth=max_depth,
        max_pages=max_pages,
        include_patterns=check_patterns(request.include_patterns, "include_patterns"),
        exclude_patterns=check_patterns(request.exclude_patterns, "exclude_patterns"),
        scope=scope,  # type: ignore[arg-type]
        headers=header_refs,
        cookies=cookie_refs,
        auth_hosts=hosts,
    )
    return params, notes
