"""Crawl parameters checked before a job is queued: the start URL, path patterns, the default title."""

from __future__ import annotations

from urllib.parse import urlsplit

from services.errors import InvalidArgument
from services.net.urls import normalize_url

SCOPES = ("same-host", "same-domain", "under-path")
MAX_PATTERNS = 20
MAX_PATTERN_LENGTH = 300


def default_source_title(url: str) -> str:
    """The source title for a crawl started without one: the URL's host (and port, if any)."""
    return urlsplit(url).netloc or url


def _check_patterns(patterns: list[str] | None, name: str) -> list[str]:
    if not patterns:
        return []
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise InvalidArgument(f"{name} must be a list of strings.", f'Pass {name} like ["/docs/*", "blog"].')
    cleaned = [p.strip() for p in patterns if p.strip()]
    if len(cleaned) > MAX_PATTERNS:
        raise InvalidArgument(f"{name} has {len(cleaned)} patterns (at most {MAX_PATTERNS}).", "Use fewer patterns.")
    too_long = [p for p in cleaned if len(p) > MAX_PATTERN_LENGTH]
    if too_long:
        raise InvalidArgument(
            f"A pattern in {name} is longer than {MAX_PATTERN_LENGTH} characters.", "Use shorter patterns."
        )
    return cleaned


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
