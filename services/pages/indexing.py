"""Whether a page is meant to be indexed: `<meta name="robots" content="noindex">` (and `nofollow`), and
the index and search pages a documentation generator makes, found by their `<link rel="index">` or
`<link rel="search">` pointing at the page itself (Sphinx's genindex.html and search.html). A crawl follows
such a page's links but does not store it: a list of every term on the site matches every query."""

from __future__ import annotations

from services.net.urls import normalize_url
from services.pages.base import PageContext, Step

NOINDEX = "noindex"
NOFOLLOW = "nofollow"


def robots_directives(page: PageContext) -> set[str]:
    """The directives of the page's `<meta name="robots">` tags, lower-cased ("none" = noindex, nofollow)."""
    assert page.tree is not None
    found: set[str] = set()
    for meta in page.tree.iter("meta"):
        if (meta.get("name") or "").strip().lower() == "robots":
            found |= {d.strip().lower() for d in (meta.get("content") or "").split(",") if d.strip()}
    if "none" in found:
        found |= {NOINDEX, NOFOLLOW}
    return found


def links_to_itself(page: PageContext, rel: str) -> bool:
    """Whether a `<link rel=...>` of the page points at the page itself ("#", "" or its own URL)."""
    assert page.tree is not None
    for link in page.tree.iter("link"):
        if rel not in (link.get("rel") or "").lower().split():
            continue
        href = (link.get("href") or "").strip()
        if href in ("", "#"):
            return True
        if page.url and normalize_url(href, base=page.url) == normalize_url(page.url):
            return True
    return False


class DetectNoIndex(Step):
    """Set `metadata["noindex"]` (why) and `metadata["nofollow"]` for pages a crawl should not store."""

    def run(self, page: PageContext) -> None:
        if page.tree is None:
            return
        directives = robots_directives(page)
        if NOINDEX in directives:
            page.metadata[NOINDEX] = "robots meta tag"
        elif links_to_itself(page, "index") or links_to_itself(page, "search"):
            page.metadata[NOINDEX] = "generated index or search page"
        if NOFOLLOW in directives:
            page.metadata[NOFOLLOW] = True
