"""OpenDocument text (.odt) to markdown with odfpy: headings (text:h outline levels), lists, tables."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from services.parsers.base import DocumentParser, ParsedDocument
from services.parsers.markup import (
    heading,
    join_blocks,
    list_item,
    markdown_table,
    no_text,
    one_line,
    paragraph,
    unreadable,
)

#: Containers whose children are walked as body blocks.
_CONTAINERS = frozenset({"section", "index-body", "text-content", "change-tracked-text"})


def _text(element: Any) -> str:
    from odf import teletype

    return one_line(teletype.extractText(element))


def _local(element: Any) -> str:
    """The element's local name ("p", "h", "list", "table", ...), "" for text nodes."""
    qname = getattr(element, "qname", None)
    return qname[1] if isinstance(qname, tuple) else ""


def _attribute(element: Any, name: str) -> str | None:
    for (_, local), value in getattr(element, "attributes", {}).items():
        if local == name:
            return value
    return None


def _list_blocks(element: Any, depth: int) -> list[str]:
    lines: list[str] = []
    for item in element.childNodes:
        if _local(item) not in ("list-item", "list-header"):
            continue
        for child in item.childNodes:
            if _local(child) == "list":
                lines.extend(_list_blocks(child, depth + 1))
            elif _local(child) in ("p", "h") and _text(child):
                lines.append(list_item(_text(child), depth))
    return lines


def _table_rows(element: Any) -> list[list[str]]:
    rows: list[list[str]] = []
    for child in element.childNodes:
        name = _local(child)
        if name == "table-row":
            rows.append([_text(cell) for cell in child.childNodes if _local(cell) == "table-cell"])
        elif name in ("table-header-rows", "table-rows", "table-row-group"):
            rows.extend(_table_rows(child))
    return rows


def _blocks(element: Any) -> list[str]:
    """Markdown blocks for the body children of `element`, in document order."""
    blocks: list[str] = []
    for child in element.childNodes:
        name = _local(child)
        if name == "h":
            level = _attribute(child, "outline-level")
            blocks.append(heading(int(level) if level and level.isdigit() else 1, _text(child)))
        elif name == "p":
            blocks.append(paragraph(_text(child)))
        elif name == "list":
            blocks.append("\n".join(_list_blocks(child, 0)))
        elif name == "table":
            blocks.append(markdown_table(_table_rows(child)))
        elif name in _CONTAINERS:
            blocks.extend(_blocks(child))
    return blocks


class OdtParser(DocumentParser):
    """OpenDocument text files (.odt, LibreOffice Writer)."""

    extensions = (".odt",)

    def parse(self, data: bytes, path: Path | None = None) -> ParsedDocument:
        """Body as markdown; the title is the document's dc:title, else the first level-1 heading."""
        from odf import dc, opendocument

        name = path.name if path is not None else "document"
        try:
            document = opendocument.load(io.BytesIO(data))
            content = join_blocks(_blocks(document.text))
            titles = document.meta.getElementsByType(dc.Title) if document.meta is not None else []
        except Exception as exc:  # bad zip, missing content.xml, bad XML, ...
            raise unreadable(name, "OpenDocument text (.odt)", exc) from exc
        if not content:
            raise no_text(name)
        title = _text(titles[0]) if titles else ""
        if not title:
            title = next((line[2:] for line in content.split("\n") if line.startswith("# ")), "")
        return ParsedDocument(content=content, title=title or None, document_type="odt", metadata={})
