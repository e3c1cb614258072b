"""PowerPoint (.pptx) decks to markdown with python-pptx: one `# title` section per slide.

Slides are separated by PAGE_BREAK, so every chunk knows its slide number(s).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE_TYPE, PP_PLACEHOLDER

from services.parsers.base import PAGE_BREAK, DocumentParser, ParsedDocument
from services.parsers.markup import heading, join_blocks, list_item, markdown_table, no_text, one_line, unreadable
from services.parsers.markup import paragraph as escape_markup

_TITLE_PLACEHOLDERS = frozenset({PP_PLACEHOLDER.TITLE, PP_PLACEHOLDER.CENTER_TITLE, PP_PLACEHOLDER.VERTICAL_TITLE})


def _is_title(shape: Any) -> bool:
    try:
        return bool(shape.is_placeholder and shape.placeholder_format.type in _TITLE_PLACEHOLDERS)
    except ValueError:  # not a placeholder after all
        return False


def _shapes_in_order(shapes: Any) -> Iterator[Any]:
    """Shapes top-to-bottom, left-to-right; group shapes are expanded."""

    def position(shape: Any) -> tuple[int, int]:
        return (shape.top or 0, shape.left or 0)

    for shape in sorted(shapes, key=position):
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            yield from _shapes_in_order(shape.shapes)
        else:
            yield shape


def _text_frame_markdown(shape: Any) -> str:
    lines = []
    for paragraph in shape.text_frame.paragraphs:
        text = one_line(paragraph.text)
        if text:
            lines.append(list_item(text, paragraph.level) if paragraph.level else escape_markup(text))
    return "\n".join(lines)


def _slide_markdown(slide: Any, number: int) -> tuple[str, str, bool]:
    """(title, markdown, has_text) of one slide; an untitled slide is headed "Slide N"."""
    title = ""
    blocks: list[str] = []
    for shape in _shapes_in_order(slide.shapes):
        if shape.has_text_frame and _is_title(shape) and not title:
            title = one_line(shape.text_frame.text)
        elif shape.has_text_frame:
            blocks.append(_text_frame_markdown(shape))
        elif getattr(shape, "has_table", False) and shape.has_table:
            blocks.append(markdown_table([[cell.text for cell in row.cells] for row in shape.table.rows]))
    if slide.has_notes_slide:
        notes = one_line(slide.notes_slide.notes_text_frame.text if slide.notes_slide.notes_text_frame else "")
        if notes:
            blocks.append(f"Notes: {notes}")
    has_text = bool(title or join_blocks(blocks))
    return title, join_blocks([heading(1, title or f"Slide {number}"), *blocks]), has_text


class PptxParser(DocumentParser):
    """PowerPoint decks (.pptx): slide titles as headings, text, tables and speaker notes."""

    extensions = (".pptx",)

    def parse(self, data: bytes, path: Path | None = None) -> ParsedDocument:
        """One section per slide, slides separated by PAGE_BREAK; title from core properties or slide 1."""
        name = path.name if path is not None else "document"
        try:
            presentation = Presentation(io.BytesIO(data))
            slides = [_slide_markdown(slide, number) for number, slide in enumerate(presentation.slides, start=1)]
        except Exception as exc:  # python-pptx raises many types for bad zips / XML
            raise unreadable(name, "PowerPoint (.pptx)", exc) from exc
        if not any(has_text for _, _, has_text in slides):
            raise no_text(name)
        title = one_line(presentation.core_properties.title or "") or next((t for t, _, _ in slides if t), "")
        return ParsedDocument(
            content=PAGE_BREAK.join(markdown for _, markdown, _ in slides),
            title=title or None,
            document_type="pptx",
            metadata={"slides": len(slides)},
        )
