"""Outlinks: every <a href> of the page (chrome included, so navigation still leads the crawl), absolute;
and the links of a markdown document, for the page graph of ingested text and files.

A link is stored as an absolute, normalised URL: http(s) always; `file:` only from a document that is a
file itself (its relative links name its neighbours, whose documents carry `Path.as_uri()` URLs). A
crawled page's base is http(s), so a `file:` link never reaches the crawl frontier."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import quote, unquote, urljoin, urlsplit

from services.net.robots import markdown_link_targets
from services.net.urls import normalize_url
from services.pages.base import PageContext, Step

#: links kept per document (a link farm must not fill the links table)
MAX_DOCUMENT_LINKS = 1000


def file_url(url: str) -> str:
    """A `file:` URL spelled as `Path.as_uri()` spells it: path percent-encoded, no query or fragment."""
    return "file://" + quote(unquote(urlsplit(url).path), safe="/")


def link_url(target: str, base: str | None) -> str | None:
    """One link target as stored (see the module docstring), or None when it cannot be one."""
    target = target.strip()
    if base and base.startswith("file:") and target:
        try:
            joined = urljoin(base, target)
        except ValueError:
            return None
        if joined.startswith("file:"):
            return file_url(joined)
    return normalize_url(target, base=base)


def unique_normalized(urls: Iterable[str], base: str, limit: int | None = None) -> list[str]:
    """Normalise `urls` against `base`, drop the ones that cannot be links, de-duplicate keeping order
    (the first `limit` when given)."""
    seen: dict[str, None] = {}
    for url in urls:
        normalized = link_url(url, base)
        if normalized:
            seen.setdefault(normalized, None)
            if limit is not None and len(seen) >= limit:
                break
    return list(seen)


def markdown_links(text: str, base: str | None) -> list[str]:
    """The targets of a markdown document's links `[label](url)`, absolute (relative ones only with a
    base: the document's URL), de-duplicated, at most MAX_DOCUMENT_LINKS; linear time
    (services.net.robots.markdown_link_targets)."""
    return unique_normalized(markdown_link_targets(text), base or "", MAX_DOCUMENT_LINKS)


class ExtractLinks(Step):
    """Fill `page.links` from the whole document (resolved against <base href> when there is one)."""

    def run(self, page: PageContext) -> None:
        if page.tree is None or not page.url:
            return
        base = page.url
        base_href = page.tree.xpath("//base/@href")
        if base_href:
            base = link_url(str(base_href[0]), page.url) or page.url
        page.links = unique_normalized((str(h) for h in page.tree.xpath("//a/@href")), base)
