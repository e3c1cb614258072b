"""HTML to markdown (ATX headings, fenced code), dropping page chrome and scripts."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from bs4 import BeautifulSoup, Tag
from markdownify import ATX, MarkdownConverter

from services.errors import InvalidArgument
from services.parsers.base import DocumentParser, ParsedDocument
from services.parsers.text import decode_text, looks_binary

logger = logging.getLogger(__name__)

HTML_EXTENSIONS: tuple[str, ...] = (".html", ".htm", ".xhtml")

#: Elements removed (with their content) before conversion.
DROPPED_TAGS: tuple[str, ...] = (
    "script",
    "style",
    "nav",
    "footer",
    "noscript",
    "template",
    "svg",
    "iframe",
    "head",
)

_META_CHARSET_RE = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_LANGUAGE_CLASS_RE = re.compile(r"^(?:language|lang)-(.+)$")
_TRAILING_SPACE_RE = re.compile(r"[ \t]+\n")
_EXTRA_BLANK_LINES_RE = re.compile(r"\n{3,}")
_WHITESPACE_RE = re.compile(r"\s+")


def _code_language(pre: Tag) -> str:
    """The language of a <pre> block from a `language-xxx`/`lang-xxx` class on it or its <code>."""
    candidates = [pre]
    code = pre.find("code")
    if isinstance(code, Tag):
        candidates.append(code)
    for element in candidates:
        for css_class in element.get("class") or []:
            match = _LANGUAGE_CLASS_RE.match(css_class)
            if match:
                return match.group(1)
    return ""


def _clean_text(text: str) -> str | None:
    """Collapse whitespace; None when nothing is left."""
    collapsed = _WHITESPACE_RE.sub(" ", text).strip()
    return collapsed or None


def _extract_title(soup: BeautifulSoup) -> str | None:
    """The <title> text, else the first <h1> text, else None."""
    for tag_name in ("title", "h1"):
        tag = soup.find(tag_name)
        if isinstance(tag, Tag):
            title = _clean_text(tag.get_text(" "))
            if title:
                return title
    return None


def _tidy_markdown(markdown: str) -> str:
    """Strip trailing spaces on lines and collapse 3+ newlines (2+ blank lines) into one blank line."""
    markdown = _TRAILING_SPACE_RE.sub("\n", markdown)
    return _EXTRA_BLANK_LINES_RE.sub("\n\n", markdown).strip()


def html_to_markdown(html: str) -> tuple[str | None, str]:
    """Convert an HTML page to markdown; return (title, markdown).

    Scripts, styles, navigation, footers and the <head> are dropped; headings become ATX
    (`#`), <pre> blocks become fenced code (with the language from `language-xxx` classes).
    """
    soup = BeautifulSoup(html, "html.parser")
    title = _extract_title(soup)
    for tag in soup.find_all(DROPPED_TAGS):
        tag.decompose()
    converter = MarkdownConverter(
        heading_style=ATX,
        bullets="-",
        escape_underscores=False,
        escape_asterisks=False,
        escape_misc=False,
        code_language_callback=_code_language,
    )
    return title, _tidy_markdown(converter.convert_soup(soup))


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
        title, markdown = html_to_markdown(decode_html(data))
        if not markdown:
            raise InvalidArgument(
                f"{name} has no readable text once scripts, styles and navigation are removed",
                suggestion="If the page is rendered by JavaScript, crawl it with the browser enabled "
                "or save the rendered page instead.",
            )
        return ParsedDocument(content=markdown, title=title, document_type="html")
