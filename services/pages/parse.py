"""Parse HTML into an lxml tree (C parser: a 100 KB page in a few milliseconds, lenient with bad markup)."""

from __future__ import annotations

import lxml.html
from lxml import etree

from services.pages.base import PageContext, Step


def parse_html(source: str) -> lxml.html.HtmlElement | None:
    """The document's root element, or None when there is nothing to parse."""
    if not source.strip():
        return None
    try:
        return lxml.html.document_fromstring(source)
    except (etree.ParserError, ValueError):
        # e.g. an XML declaration with an encoding in a str: parse the bytes instead
        try:
            return lxml.html.document_fromstring(source.encode("utf-8"))
        except (etree.ParserError, ValueError):
            return None


def classes(element: lxml.html.HtmlElement) -> set[str]:
    return set((element.get("class") or "").split())


class ParseHtml(Step):
    """Build `page.tree` from `page.source`."""

    def run(self, page: PageContext) -> None:
        page.tree = parse_html(page.source)
