"""Rich Text Format (.rtf) to text with striprtf; paragraphs whose style is a heading become ATX headings."""

from __future__ import annotations

import re
from pathlib import Path

from services.parsers.base import DocumentParser, ParsedDocument
from services.parsers.markup import heading, join_blocks, no_text, one_line, paragraph, unreadable
from services.parsers.text import decode_text

#: Innermost brace groups, and a style number `\s2` inside one (stylesheet entries `{\s2 ... heading 1;}`).
#: The name is cut out in Python: the old single pattern backtracked cubically on a long entry.
_GROUP_RE = re.compile(r"\{([^{}]*)\}")
_STYLE_NUMBER_RE = re.compile(r"\\s(\d+)\b")
_HEADING_NAME_RE = re.compile(r"^\s*heading\s*(\d)\s*$", re.IGNORECASE)
#: Paragraph properties that make a heading: a heading style or an outline level.
_PARAGRAPH_STYLE_RE = re.compile(r"\\(s|outlinelevel)(\d+) ?")
_MARK = "\u0091H{}\u0092"
_MARK_RE = re.compile("\u0091H(\\d)\u0092")


def _heading_styles(rtf: str) -> dict[str, int]:
    """Style number -> heading level, from the stylesheet."""
    start = rtf.find("{\\stylesheet")
    if start < 0:
        return {}
    sheet = rtf[start : start + 200_000]
    styles = {}
    for group in _GROUP_RE.findall(sheet):
        entry = _style_entry(group)
        match = _HEADING_NAME_RE.match(entry[1]) if entry else None
        if entry and match:
            styles[entry[0]] = int(match.group(1))
    return styles


def _style_entry(group: str) -> tuple[str, str] | None:
    """(style number, name) of one stylesheet entry such as `\\s2\\sbasedon0 heading 1;`, or None.

    The name is the text after the first blank that follows the last control word (or `;`).
    """
    number = _STYLE_NUMBER_RE.search(group)
    if number is None or not group.endswith(";"):
        return None
    body = group[number.end() : -1]
    tail = body[max(body.rfind("\\"), body.rfind(";")) + 1 :]
    blank = next((index for index, char in enumerate(tail) if char.isspace()), None)
    name = tail[blank + 1 :] if blank is not None else ""
    return (number.group(1), name) if name else None


def _mark_headings(rtf: str) -> str:
    """Put a marker after every paragraph-style control word that means "heading level N"."""
    styles = _heading_styles(rtf)
    sheet_start = rtf.find("{\\stylesheet")
    sheet_end = rtf.find("}}", sheet_start) + 2 if sheet_start >= 0 else -1

    def mark(match: re.Match[str]) -> str:
        if sheet_start <= match.start() < sheet_end:
            return match.group(0)
        kind, number = match.groups()
        level = styles.get(number) if kind == "s" else int(number) + 1
        if level is None or not 1 <= level <= 6:
            return match.group(0)
        return f"\\{kind}{number} {_MARK.format(level)}"

    return _PARAGRAPH_STYLE_RE.sub(mark, rtf)


def rtf_markdown(rtf: str) -> str:
    """RTF source to markdown-ish text: one paragraph per block, heading paragraphs as `#` lines."""
    from striprtf.striprtf import rtf_to_text

    text = rtf_to_text(_mark_headings(rtf), errors="ignore")
    blocks = []
    for line in text.split("\n"):
        marks = _MARK_RE.findall(line)
        line = one_line(_MARK_RE.sub("", line))
        if line:
            blocks.append(heading(int(marks[0]), line) if marks else paragraph(line))
    return join_blocks(blocks)


class RtfParser(DocumentParser):
    """RTF documents (.rtf): text by paragraph; `heading N` styles and outline levels become headings."""

    extensions = (".rtf",)

    def parse(self, data: bytes, path: Path | None = None) -> ParsedDocument:
        """Convert to text; the title is the first level-1 heading, if any."""
        name = path.name if path is not None else "document"
        source = decode_text(data)
        if not source.lstrip().startswith("{\\rtf"):
            raise unreadable(name, "RTF", ValueError("missing {\\rtf header"))
        try:
            content = rtf_markdown(source)
        except Exception as exc:  # striprtf on malformed input
            raise unreadable(name, "RTF", exc) from exc
        if not content:
            raise no_text(name)
        title = next((line[2:] for line in content.split("\n") if line.startswith("# ")), None)
        return ParsedDocument(content=content, title=title, document_type="rtf", metadata={})
