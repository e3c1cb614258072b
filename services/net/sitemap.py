"""Sitemaps (urlset and sitemapindex) read under the "sitemap" budget, entities never expanded.

A sitemap comes from the site being crawled, so it is hostile until read: Python's XML parser expands
the entities a document declares in its DTD, and a 2 MB sitemap of nested entities becomes hundreds
of MB of text. defusedxml refuses any DTD outright (no entities, no external references); the elements
are read as a stream, counted and their depth checked (services/core/budgets.py), and reading stops once
`max_urls` locations are found. Runs in a worker thread (services/crawl/discovery.py).
"""

from __future__ import annotations

import io
import logging

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError, iterparse

from services.core.budgets import budget

logger = logging.getLogger(__name__)

#: Depth of a `<loc>`: urlset (1) > url (2) > loc (3), or sitemapindex > sitemap > loc.
LOC_DEPTH = 3


def local_name(tag: str) -> str:
    """Strip an XML namespace: "{http://www.sitemaps.org/...}loc" -> "loc"."""
    return tag.rsplit("}", 1)[-1].lower()


def parse_sitemap(xml_text: str, max_urls: int | None = None) -> tuple[list[str], list[str]]:
    """Return (page URLs, nested sitemap URLs) from a urlset or sitemapindex document, at most `max_urls`.

    Namespaces are ignored; invalid XML or an unknown root yields two empty lists. A document with a
    DTD, or over the budget (bytes, elements, depth, time), raises OverBudget.
    """
    limits = budget("sitemap")
    text = xml_text.lstrip("\ufeff \t\r\n")
    limits.check_input(len(text), what="the sitemap")
    elements, depth = limits.meter(), 0
    kind: str | None = None
    locations: list[str] = []
    try:
        for event, element in iterparse(io.StringIO(text), events=("start", "end"), forbid_dtd=True):
            if event == "start":
                elements.tick()
                depth += 1
                if depth > limits.depth:
                    raise limits.over(f"elements nested deeper than {limits.depth}")
                if kind is None:
                    kind = local_name(element.tag)
                    if kind not in ("urlset", "sitemapindex"):
                        return [], []
                continue
            if depth == LOC_DEPTH and local_name(element.tag) == "loc" and element.text and element.text.strip():
                locations.append(element.text.strip())
                if max_urls is not None and len(locations) >= max_urls:
                    break
            elif depth == LOC_DEPTH - 1:
                element.clear()  # an entry read: its children are not kept
            depth -= 1
    except DefusedXmlException as exc:
        raise limits.over(f"it declares a DTD or entities ({type(exc).__name__}), which are never read") from None
    except ParseError:
        logger.debug("sitemap is not valid XML")
        return [], []
    return (locations, []) if kind == "urlset" else ([], locations)
