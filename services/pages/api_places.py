"""Where on its page each documented name's entry starts (issue 36, point 7).

`ExtractApiNames` says which names a page documents and the element id of each; hybrid search wants
the chunk that holds the entry (services/search/names.py), so the crawl records the entry's character
offset in the page's markdown. The converter (services/pages/markdown.py) keeps no map from elements
to output, so `MarkApiNames` puts a private-use marker (U+E000, index, U+E001) before the first
visible character of each documented element, and `PlaceApiNames` reads the markers' places out of the
markdown and removes them: the markdown is exactly what it would be without them (a marker sits after
leading whitespace, so collapsing and stripping treat the text as before). A page whose text already
holds U+E000 is not marked (its names keep no offset). Each `api_names` entry gains a fourth value:
the offset, 0 for the page's own item (an empty anchor), None when the element is not in the article.
"""

from __future__ import annotations

import re2
from lxml.html import HtmlElement

from services.pages.api_names import API_NAMES
from services.pages.base import PageContext, Step

OPEN, CLOSE = "\ue000", "\ue001"
MARK = re2.compile("\ue000([0-9]+)\ue001")


class MarkApiNames(Step):
    """Mark the element of each documented name inside the article (before ToMarkdown)."""

    def run(self, page: PageContext) -> None:
        names = page.metadata.get(API_NAMES)
        if not names or page.main is None or OPEN in page.main.text_content():
            return
        wanted = {entry[1]: index for index, entry in enumerate(names) if entry[1]}
        for element in page.main.iter():
            if isinstance(element.tag, str) and wanted:
                index = wanted.pop(element.get("id") or "", None)
                if index is not None:
                    _mark(element, index)
        page.api_marked = True


def _mark(element: HtmlElement, index: int) -> None:
    """The marker before the element's first non-blank text (its own text or a descendant's)."""
    for text in element.xpath(".//text()"):
        visible = text.lstrip()
        if visible:
            marked = text[: len(text) - len(visible)] + f"{OPEN}{index}{CLOSE}" + visible
            owner = text.getparent()
            if text.is_tail:
                owner.tail = marked
            else:
                owner.text = marked
            return


class PlaceApiNames(Step):
    """Read the markers' offsets into the `api_names` entries and take the markers out (after ToMarkdown)."""

    def run(self, page: PageContext) -> None:
        names = page.metadata.get(API_NAMES)
        if not names:
            return
        places: dict[int, int] = {}
        if page.api_marked:
            parts, last, removed = [], 0, 0
            for found in MARK.finditer(page.markdown):
                parts.append(page.markdown[last : found.start()])
                places.setdefault(int(found.group(1)), found.start() - removed)
                removed += found.end() - found.start()
                last = found.end()
            parts.append(page.markdown[last:])
            page.markdown = "".join(parts)
        for index, entry in enumerate(names):
            entry.append(places.get(index) if entry[1] else 0)
