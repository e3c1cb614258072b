"""EPUB books to markdown: chapters in reading (spine) order, XHTML converted with markdownify.

Chapter headings (<h1>..<h6>) become ATX headings, so chunks keep their chapter/section path.
"""

from __future__ import annotations

import io
import logging
import re
import warnings
from pathlib import Path

from services.parsers.base import DocumentParser, ParsedDocument
from services.parsers.markup import join_blocks, no_text, one_line, unreadable

logger = logging.getLogger(__name__)

_DROP_TAGS = ("script", "style", "head", "nav")
_BLANK_RUN_RE = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")


def chapter_markdown(xhtml: bytes) -> str:
    """One XHTML chapter as markdown (scripts, styles and navigation dropped)."""
    from bs4 import BeautifulSoup, XMLParsedAsHTMLWarning
    from markdownify import MarkdownConverter

    with warnings.catch_warnings():  # XHTML read by the lenient HTML parser on purpose
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        soup = BeautifulSoup(xhtml, "lxml")
    for tag in soup(_DROP_TAGS):
        tag.decompose()
    body = soup.body or soup
    markdown = MarkdownConverter(heading_style="ATX", bullets="-", strip=["img"]).convert_soup(body)
    return _BLANK_RUN_RE.sub("\n\n", markdown).strip()


class EpubParser(DocumentParser):
    """EPUB 2/3 books: every spine document (chapter) in order, as markdown."""

    extensions = (".epub",)

    def parse(self, data: bytes, path: Path | None = None) -> ParsedDocument:
        """Chapters joined by blank lines; the title is the book's dc:title."""
        import ebooklib
        from ebooklib import epub

        name = path.name if path is not None else "book"
        try:
            book = epub.read_epub(io.BytesIO(data), options={"ignore_ncx": True})
        except Exception as exc:  # bad zip, missing container/OPF, ...
            raise unreadable(name, "EPUB", exc) from exc
        chapters = []
        for item_id, _linear in book.spine:
            item = book.get_item_with_id(item_id)
            if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT:
                continue
            try:
                chapters.append(chapter_markdown(item.get_content()))
            except Exception as exc:  # one broken chapter should not lose the book
                logger.warning("%s: could not convert %s: %s", name, item.get_name(), exc)
        content = join_blocks(chapters)
        if not content:
            raise no_text(name)
        titles = book.get_metadata("DC", "title")
        title = one_line(str(titles[0][0])) if titles and titles[0][0] else ""
        return ParsedDocument(content=content, title=title or None, document_type="epub", metadata={})
