"""HTML files: the page's article as markdown (services.pages: the pipeline crawled pages go through)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from services.core.errors import InvalidArgument
from services.flags.hidden import evidence
from services.pages import extract_html
from services.parsers.base import DocumentParser, ParsedDocument
from services.parsers.text import decode_text, looks_binary

logger = logging.getLogger(__name__)

HTML_EXTENSIONS: tuple[str, ...] = (".html", ".htm", ".xhtml")

#: `<meta ... charset="x">`; `[^<>]` stops each scan at the next tag and one class covers the blanks and
#: quotes after `=`, so nothing is tried twice (the old `\s*["']?\s*` was quadratic on a run of spaces).
_META_CHARSET_RE = re.compile(rb"""<meta[^<>]+?charset\s*=[\s"']*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


def html_to_markdown(html: str, url: str | None = None) -> tuple[str | None, str]:
    """An HTML page's (title, article markdown), by the same pipeline as crawled pages (services.pages)."""
    page = extract_html(html, url)
    return page.title, page.markdown


def decode_html(data: bytes) -> str:
    """Decode HTML bytes: UTF-8 first, then a <meta charset> declaration, then latin-1."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    match = _META_CHARSET_RE.search(data[:4096])
    if match:
        charset = match.group(1).decode("ascii", "ignore")
        try:
            return data.decode(charset)
        except (LookupError, UnicodeDecodeError):
            logger.debug("declared charset %r did not decode the page", charset)
    return decode_text(data)


class HtmlParser(DocumentParser):
    """HTML files, converted to markdown."""

    extensions = HTML_EXTENSIONS

    def parse(self, data: bytes, path: Path | None = None) -> ParsedDocument:
        """Convert to markdown; raise InvalidArgument if the page has no readable text."""
        name = path.name if path is not None else "document"
        if looks_binary(data):
            raise InvalidArgument(
                f"{name} looks like a binary file (NUL bytes in its first 8 KB), not HTML",
                suggestion="Check the file is really an HTML page.",
            )
        page = extract_html(decode_html(data), path.resolve().as_uri() if path is not None else None)
        title, markdown = page.title, page.markdown
        if not markdown:
            raise InvalidArgument(
                f"{name} has no readable text once scripts, styles and navigation are removed",
                suggestion="If the page is rendered by JavaScript, crawl it with the browser enabled "
                "or save the rendered page instead.",
            )
        metadata = {k: v for k, v in page.metadata.items() if k in {"description", "generator", "language"}}
        metadata["extractor"] = page.metadata.get("extractor")
        metadata.update(evidence(page.metadata))  # hidden-text marks for the injection flags
        return ParsedDocument(content=markdown, title=title, document_type="html", metadata=metadata, links=page.links)
