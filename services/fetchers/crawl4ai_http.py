"""HTTP fetcher: httpx for the exchange, services.pages for turning a page into article markdown and links.

Why not crawl4ai's `AsyncHTTPCrawlerStrategy` for the request itself (checked against crawl4ai
0.9.5): it reads the whole body (`response.read()`) with no size limit, lets aiohttp follow redirects
without exposing the hops, raises a bare `HTTPStatusError` for every non-2xx status (304 included)
without the response headers (so no Location, ETag or Last-Modified), and writes every non-HTML body
to a downloads folder on disk. Those break the SSRF, size, conditional-request and content-type rules
here. So httpx does the raw exchange over a pinned client (`services.net.connector`: every
connection, so every redirect hop, resolves once, is checked and goes to the checked address; bodies
are streamed and capped) and the page pipeline (`services.pages.extract_page`: main content, chrome
removed, markdown, outlinks) runs in a worker thread so the event loop never blocks on parsing, at most
`extraction_slots()` pages at a time per fetcher (one per core): a parsed page's tree is several times
its HTML, so memory stays bounded however many pages a crawl has in flight (and CPU-bound extraction
gains nothing beyond one thread per core). The HTTP status is trusted as is.

crawl4ai (used by the browser fetcher) reads CRAWL4_AI_BASE_DIRECTORY when it is imported, so
`prepare_crawl4ai_home` sets it (to `<data_dir>/crawl4ai`) before its first, lazy, import.
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from services.core.errors import ServiceError
from services.embeddings.models import cpu_threads
from services.fetchers.base import Fetcher, FetchResult
from services.net.connector import pinned_client
from services.net.credentials import SiteCredentials
from services.net.urls import normalize_url
from services.openapi.load import SPEC_MEDIA_TYPES
from services.pages import ExtractedPage, extract_page
from services.pages.links import unique_normalized

__all__ = ["HTML_TYPES", "Crawl4aiHttpFetcher", "fill_from_page", "prepare_crawl4ai_home", "unique_normalized"]

if TYPE_CHECKING:
    from services.core.settings import Settings

logger = logging.getLogger(__name__)

MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({"text/markdown", "text/x-markdown", "text/plain"})
PDF_TYPES = frozenset({"application/pdf"})
#: JSON and YAML bodies are handed over raw: an OpenAPI spec becomes documents (services.openapi).
DATA_TYPES = SPEC_MEDIA_TYPES
ACCEPT = "text/html,application/xhtml+xml;q=0.9,text/markdown;q=0.9,text/plain;q=0.8,application/pdf;q=0.7,*/*;q=0.1"
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


@dataclass(frozen=True)
class Crawl4aiPaths:
    """Where crawl4ai may write: its home (cache, logs) and its downloads folder."""

    base: Path
    downloads: Path


def prepare_crawl4ai_home(settings: Settings) -> Crawl4aiPaths:
    """Point crawl4ai's home at `<data_dir>/crawl4ai` (and silence its cloud banner).

    Must run before crawl4ai is first imported: several of its modules read the variable at import.
    """
    base = Path(settings.data_dir) / "crawl4ai"
    downloads = base / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    current = os.environ.get("CRAWL4_AI_BASE_DIRECTORY")
    if "crawl4ai" in sys.modules and current != str(base):
        logger.warning("crawl4ai was imported before its home was set; it keeps using %s", current)
    os.environ["CRAWL4_AI_BASE_DIRECTORY"] = str(base)
    os.environ.setdefault("CRAWL4AI_NO_CLOUD_NOTICE", "1")
    return Crawl4aiPaths(base=base, downloads=downloads)


def load_crawl4ai() -> None:
    """Import the crawl4ai modules the browser fetcher renders with (about a second, once per process).

    Done when a browser fetcher is built, after `prepare_crawl4ai_home`, so the import never happens
    with the wrong home directory nor in the middle of a crawl. The HTTP fetcher does not need it.
    """
    import crawl4ai.async_webcrawler  # noqa: F401


def media_type(content_type_header: str) -> str:
    """The lower-cased media type of a Content-Type header, without parameters (charset etc.)."""
    return content_type_header.split(";", 1)[0].strip().lower()


def _known_codec(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def decode_body(body: bytes, header_charset: str | None, sniff_meta: bool) -> str:
    """Decode with the header charset, else a <meta charset> (HTML), else UTF-8, else cp1252."""
    charset = _known_codec(header_charset)
    if charset is None and sniff_meta:
        match = _META_CHARSET.search(body[:4096])
        charset = _known_codec(match.group(1).decode("ascii")) if match else None
    if charset:
        return body.decode(charset, errors="replace")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("cp1252", errors="replace")


def sniff_media_type(body: bytes) -> str | None:
    """Guess a missing Content-Type from the first bytes: PDF, HTML, or None."""
    head = body[:512].lstrip().lower()
    if head.startswith(b"%pdf-"):
        return "application/pdf"
    if head.startswith((b"<!doctype html", b"<html")) or b"<body" in head:
        return "text/html"
    return None


def extraction_slots() -> int:
    """Pages one fetcher extracts at once: one per core."""
    return cpu_threads()


class BodyTooLarge(Exception):
    """The body is larger than crawl_max_page_bytes."""


@dataclass
class _Download:
    """A 2xx response whose body was read."""

    final_url: str
    status: int
    content_type: str
    charset: str | None
    body: bytes
    etag: str | None
    last_modified: str | None


class Crawl4aiHttpFetcher(Fetcher):
    """Fetches pages over HTTP(S) with SSRF checks per hop; converts HTML with crawl4ai."""

    def __init__(self, settings: Settings, login: SiteCredentials | None = None) -> None:
        self._settings = settings
        self._login = login  # asked per hop: its headers never follow a redirect to another host
        self.paths = prepare_crawl4ai_home(settings)
        self._client: httpx.AsyncClient | None = None
        self._extracting = asyncio.Semaphore(extraction_slots())  # page trees alive at once

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = pinned_client(
                allow_private=self._settings.crawl_allow_private,
                timeout=httpx.Timeout(self._settings.crawl_page_timeout),
                headers={"User-Agent": self._settings.crawl_user_agent, "Accept": ACCEPT},
            )
        return self._client

    async def close(self) -> None:
        """Close the HTTP connection pool."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def fetch(self, url: str, *, etag: str | None = None, last_modified: str | None = None) -> FetchResult:
        """Fetch one URL; failures come back in the result (status 0 when there was no response)."""
        headers = self._conditional_headers(etag, last_modified)
        try:
            async with asyncio.timeout(self._settings.crawl_page_timeout):
                outcome = await self._exchange(url, headers)
        except (TimeoutError, httpx.TimeoutException):
            logger.info("timeout fetching %s", url)
            return FetchResult(url=url, final_url=url, status=0, error="timeout")
        except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError) as exc:
            logger.info("network error fetching %s: %s", url, exc)
            return FetchResult(url=url, final_url=url, status=0, error=f"network error: {exc!r}")
        if isinstance(outcome, FetchResult):
            return self._keep_validators(outcome, etag, last_modified)
        return await self._convert(url, outcome)

    @staticmethod
    def _conditional_headers(etag: str | None, last_modified: str | None) -> dict[str, str]:
        headers: dict[str, str] = {}
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        return headers

    @staticmethod
    def _keep_validators(result: FetchResult, etag: str | None, last_modified: str | None) -> FetchResult:
        """A 304 may omit validators: keep the caller's so they are not lost."""
        if result.not_modified:
            result.etag = result.etag or etag
            result.last_modified = result.last_modified or last_modified
        return result

    async def _exchange(self, url: str, headers: dict[str, str]) -> FetchResult | _Download:
        """GET `url`, following up to MAX_REDIRECTS redirects; each hop's connection is checked for SSRF.

        A hop to a refused address fails when its connection is opened, before any byte is sent.
        """
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            hop = {**headers, **self._login.for_url(current)} if self._login else headers
            try:
                async with self._http().stream("GET", current, headers=hop) as response:
                    location = response.headers.get("location")
                    if response.status_code in REDIRECT_STATUSES and location:
                        next_url = normalize_url(location, base=current)
                        if next_url is None:
                            error = f"bad redirect location: {location}"
                            return self._status_result(url, current, response, error)
                        current = next_url
                        continue
                    return await self._read(url, current, response)
            except ServiceError as exc:
                logger.info("blocked %s: %s", current, exc.message)
                return FetchResult(url=url, final_url=current, status=0, error=f"blocked: {exc.message}")
        return FetchResult(url=url, final_url=current, status=0, error="too many redirects")

    @staticmethod
    def _status_result(url: str, final_url: str, response: httpx.Response, error: str | None) -> FetchResult:
        return FetchResult(
            url=url,
            final_url=final_url,
            status=response.status_code,
            content_type=media_type(response.headers.get("content-type", "")),
            etag=response.headers.get("etag"),
            last_modified=response.headers.get("last-modified"),
            error=error,
        )

    async def _read(self, url: str, final_url: str, response: httpx.Response) -> FetchResult | _Download:
        """Turn a non-redirect response into a result, reading the body only for wanted content."""
        status = response.status_code
        if status == 304:
            result = self._status_result(url, final_url, response, None)
            result.not_modified = True
            return result
        if not 200 <= status < 300:
            return self._status_result(url, final_url, response, f"HTTP {status}")
        content_type = media_type(response.headers.get("content-type", ""))
        if content_type and content_type not in HTML_TYPES | TEXT_TYPES | PDF_TYPES | DATA_TYPES:
            return self._status_result(url, final_url, response, f"non-text content: {content_type}")
        try:
            body = await self._read_capped(response)
        except BodyTooLarge as exc:
            return self._status_result(url, final_url, response, str(exc))
        if not content_type:
            content_type = sniff_media_type(body) or ""
            if not content_type:
                return self._status_result(url, final_url, response, "non-text content: unknown")
        return _Download(
            final_url=final_url,
            status=status,
            content_type=content_type,
            charset=response.charset_encoding,
            body=body,
            etag=response.headers.get("etag"),
            last_modified=response.headers.get("last-modified"),
        )

    async def _read_capped(self, response: httpx.Response) -> bytes:
        """Read the (decompressed) body, aborting once it passes crawl_max_page_bytes."""
        limit = self._settings.crawl_max_page_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise BodyTooLarge(f"too large: {declared} bytes > crawl_max_page_bytes ({limit})")
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body.extend(chunk)
            if len(body) > limit:
                raise BodyTooLarge(f"too large: over crawl_max_page_bytes ({limit}) bytes")
        return bytes(body)

    async def _convert(self, url: str, download: _Download) -> FetchResult:
        """Build the FetchResult for a 2xx body: HTML via crawl4ai, text as is, PDF as raw bytes."""
        result = FetchResult(
            url=url,
            final_url=download.final_url,
            status=download.status,
            content_type=download.content_type,
            etag=download.etag,
            last_modified=download.last_modified,
        )
        if download.content_type in PDF_TYPES | DATA_TYPES:
            result.raw = download.body
            return result
        is_html = download.content_type in HTML_TYPES
        text = decode_body(download.body, download.charset, sniff_meta=is_html)
        download.body = b""  # the text replaces it: one copy of the page waits for a slot, not two
        try:
            async with self._extracting:
                page = await asyncio.to_thread(extract_page, text, download.final_url, download.content_type)
        except Exception as exc:  # a parser failure must not escape a fetch
            logger.warning("could not convert %s: %s", download.final_url, exc)
            result.error = f"conversion failed: {exc}"
            return result
        fill_from_page(result, page)
        return result


def fill_from_page(result: FetchResult, page: ExtractedPage) -> None:
    """Copy an extracted page's title, markdown, links and metadata into a fetch result."""
    result.title = page.title
    result.markdown = page.markdown
    result.links = page.links
    result.metadata = dict(page.metadata)
