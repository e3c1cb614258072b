"""Outlinks: every <a href> of the page (chrome included, so navigation still leads the crawl), absolute."""

from __future__ import annotations

from collections.abc import Iterable

from services.net.urls import normalize_url
from services.pages.base import PageContext, Step


def unique_normalized(urls: Iterable[str], base: str) -> list[str]:
    """Normalise `urls` against `base`, drop non-http(s) ones, de-duplicate keeping order."""
    seen: dict[str, None] = {}
    for url in urls:
        normalized = normalize_url(url, base=base)
        if normalized:
            seen.setdefault(normalized, None)
    return list(seen)


class ExtractLinks(Step):
    """Fill `page.links` from the whole document (resolved against <base href> when there is one)."""

    def run(self, page: PageContext) -> None:
        if page.tree is None or not page.url:
            return
        base = page.url
        base_href = page.tree.xpath("//base/@href")
        if base_href:
            base = normalize_url(str(base_href[0]), base=page.url) or page.url
        page.links = unique_normalized((str(h) for h in page.tree.xpath("//a/@href")), base)
