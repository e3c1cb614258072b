"""Word (.docx) documents to markdown with python-docx: headings, lists, tables in body order."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import docx
from docx.oxml.ns import qn
from docx.table import Table
from docx.text.paragraph import Paragraph

from services.parsers.base import DocumentParser, ParsedDocument
from services.parsers.markup import heading, join_blocks, list_item, markdown_table, no_text, one_line, unreadable
from services.parsers.markup import paragraph as escape_markup

_HEADING_STYLE_RE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
#: Built-in style ids, read when the styles part is missing or does not define the paragraph's style.
_HEADING_ID_RE = re.compile(r"^(?:heading([1-9])|(title))$", re.IGNORECASE)
_LIST_ITEM_RE = re.compile(r"^ *(?:-|1\.) ")


def _style_name(paragraph: Paragraph) -> str:
    """The style's name; for a style id the styles part does not define (or no styles part at all,
    as some tools write), the built-in name its id stands for ("Heading1" -> "Heading 1")."""
    ppr = paragraph._p.pPr
    style_id = ppr.pStyle.val if ppr is not None and ppr.pStyle is not None else None
    try:
        style = paragraph.style
        if style is not None and (style_id is None or style.style_id == style_id):
            return style.name or ""
    except (KeyError, ValueError):  # a style id the styles part does not define
        pass
    match = _HEADING_ID_RE.match(style_id or "")
    if match is None:
        return ""
    return f"Heading {match.group(1)}" if match.group(1) else "Title"


def _outline_level(paragraph: Paragraph) -> int | None:
    """The paragraph's own outline level (0-based) when set directly, else None."""
    ppr = paragraph._p.pPr
    element = ppr.find(qn("w:outlineLvl")) if ppr is not None else None
    if element is None:
        return None
    value = element.get(qn("w:val"))
    return int(value) if value is not None and value.isdigit() and int(value) < 9 else None


def _heading_level(paragraph: Paragraph, title_offset: int) -> int | None:
    """Markdown heading level of a paragraph: Title is 1, Heading N is N (+1 under a Title)."""
    name = _style_name(paragraph)
    if name.lower() == "title":
        return 1
    match = _HEADING_STYLE_RE.match(name)
    if match:
        return int(match.group(1)) + title_offset
    level = _outline_level(paragraph)
    return level + 1 + title_offset if level is not None else None


def _list_depth(paragraph: Paragraph) -> int | None:
    """Nesting depth when the paragraph is a list item (numbered or List* style), else None."""
    ppr = paragraph._p.pPr
    num_pr = ppr.find(qn("w:numPr")) if ppr is not None else None
    if num_pr is not None:
        ilvl = num_pr.find(qn("w:ilvl"))
        value = ilvl.get(qn("w:val")) if ilvl is not None else "0"
        return int(value) if value and value.isdigit() else 0
    return 0 if _style_name(paragraph).lower().startswith("list") else None


def _paragraph_markdown(paragraph: Paragraph, title_offset: int) -> str:
    text = one_line(paragraph.text)
    if not text:
        return ""
    level = _heading_level(paragraph, title_offset)
    if level is not None:
        return heading(level, text)
    depth = _list_depth(paragraph)
    if depth is not None:
        return list_item(text, depth, ordered="number" in _style_name(paragraph).lower())
    return escape_markup(text)


def _table_markdown(table: Table) -> str:
    rows: list[list[Any]] = []
    for row in table.rows:
        cells: list[Any] = []
        for cell in row.cells:
            cells.append(cell.text)
        rows.append(cells)
    return markdown_table(rows)


class DocxParser(DocumentParser):
    """Word documents (.docx): paragraphs, headings (Heading N / Title styles), lists and tables."""

    extensions = (".docx",)

    def parse(self, data: bytes, path: Path | None = None) -> ParsedDocument:
        """Convert to markdown; the title is the core-properties title, else the first heading."""
        name = path.name if path is not None else "document"
        try:
            document = docx.Document(io.BytesIO(data))
            items = list(document.iter_inner_content())
        except Exception as exc:  # python-docx raises many types for bad zips / XML
            raise unreadable(name, "Word (.docx)", exc) from exc
        paragraphs = [item for item in items if isinstance(item, Paragraph)]
        title_offset = 1 if any(_style_name(p).lower() == "title" for p in paragraphs) else 0
        blocks: list[str] = []
        previous_was_item = False
        for item in items:
            block = _paragraph_markdown(item, title_offset) if isinstance(item, Paragraph) else _table_markdown(item)
            if not block:
                continue
            is_item = isinstance(item, Paragraph) and _LIST_ITEM_RE.match(block) is not None
            if is_item and previous_was_item:
                blocks[-1] += "\n" + block  # one list, not one paragraph per item
            else:
                blocks.append(block)
            previous_was_item = is_item
        content = join_blocks(blocks)
        if not content:
            raise no_text(name)
        title = one_line(document.core_properties.title or "") or _first_heading(paragraphs, title_offset)
        return ParsedDocument(content=content, title=title or None, document_type="docx", metadata={})


def _first_heading(paragraphs: list[Paragraph], title_offset: int) -> str | None:
    for paragraph in paragraphs:
        if one_line(paragraph.text) and _heading_level(paragraph, title_offset) == 1:
            return one_line(paragraph.text)
    return None
