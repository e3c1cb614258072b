"""Page numbers for chunks of paged documents (PDF pages, PPTX slides).

Parsers separate pages with PAGE_BREAK (a line holding a form feed), so page boundaries are
character offsets recoverable from the stored content itself: re-chunking (a new title, a
re-sync, a re-embed) keeps page numbers without any extra state.
"""

from __future__ import annotations

from bisect import bisect_right

from services.chunking.base import Chunk
from services.chunking.markdown import MarkdownChunker

#: ParsedDocument.document_type values whose content is split into pages by form feeds.
PAGED_TYPES: frozenset[str] = frozenset({"pdf", "pptx"})
PAGE_SEPARATOR_CHAR = "\f"


def page_starts(content: str) -> list[int]:
    """Character offset where each page starts: [0, after 1st form feed, after 2nd, ...]."""
    starts = [0]
    position = content.find(PAGE_SEPARATOR_CHAR)
    while position >= 0:
        starts.append(position + 1)
        position = content.find(PAGE_SEPARATOR_CHAR, position + 1)
    return starts


def page_of(starts: list[int], offset: int) -> int:
    """1-based page holding the character at `offset`."""
    return bisect_right(starts, offset)


def assign_pages(chunks: list[Chunk], content: str) -> list[Chunk]:
    """Set page_start/page_end on every chunk (from its first and last character); returns chunks."""
    starts = page_starts(content)
    for chunk in chunks:
        chunk.page_start = page_of(starts, chunk.char_start)
        chunk.page_end = page_of(starts, max(chunk.char_end - 1, chunk.char_start))
    return chunks


def format_page_number(page_start: int | None, page_end: int | None) -> int | str | None:
    """The `page_number` shown to agents: 3 for one page, "3-4" for a span, None when unpaged."""
    if page_start is None:
        return None
    if page_end is None or page_end == page_start:
        return page_start
    return f"{page_start}-{page_end}"


class PagedMarkdownChunker(MarkdownChunker):
    """The markdown chunker, plus page numbers from the content's page separators."""

    def chunk(self, content: str) -> list[Chunk]:
        return assign_pages(super().chunk(content), content)
