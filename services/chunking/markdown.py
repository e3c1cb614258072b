"""Markdown-aware chunker that works on offsets into the original text.

How a document is cut:

1. **Sections.** The text is split at ATX headings (`#` .. `######`; `#` lines inside fenced
   code are ignored). Each section runs from its heading line to the next heading and carries
   the path of enclosing headings (``["Install", "Linux"]``). A section that is only a heading
   (e.g. ``# Install`` directly followed by ``## Linux``) is merged into the subsection that
   follows, so it does not become a tiny chunk of its own.
2. **Break points.** Inside a section every position where a chunk may end is scored:
   paragraph starts (after a blank line) and fenced-code boundaries score 3, other line starts
   and sentence starts score 2. A fenced code block no longer than 1.5 x chunk_size has no break
   points inside: it is kept whole. A longer block can be cut at its line starts.
3. **Packing.** A chunk takes as much text as fits in ``chunk_size`` characters (counting its
   overlap). It ends at the strongest break point in the second half of that window (the
   latest one on ties); failing that at the last whitespace there, then at any break point or
   whitespace in the first half, and as a last resort exactly at the size limit.
4. **Small chunks.** A chunk whose new text is under 20% of chunk_size is merged into the
   previous chunk of its section (or else the next one) when the result is at most
   1.5 x chunk_size.
5. **Overlap.** The first chunk of a section has no overlap. Every later chunk starts up to
   ``overlap`` characters before the end of the previous one, at the earliest sentence or line
   start in that range, else the earliest word start. Overlap never crosses a section
   boundary and never starts inside a kept-whole code block.

Every chunk satisfies ``content[c.char_start:c.char_end] == c.text``; chunks never start or
end with whitespace (offsets are moved, the text is not altered), are ordered by char_start,
and together cover every non-whitespace character. Chunks are at most chunk_size characters
except a kept-whole code block or a merged small chunk (both at most 1.5 x chunk_size).
Runs in time linear in the length of the content.
"""

from __future__ import annotations

import logging

from services.chunking.base import Chunk, Chunker
from services.chunking.breaks import (
    atom_containing,
    first_break,
    first_word_start,
    last_whitespace_break,
    strongest_break,
)
from services.chunking.layout import ChunkMode, Layout, Scanner, Span, skip_whitespace, trim_end
from services.core.errors import InvalidArgument

__all__ = ["MAX_CHUNK_FACTOR", "MIN_CHUNK_FACTOR", "ChunkMode", "MarkdownChunker"]

logger = logging.getLogger(__name__)

#: A code block up to this multiple of chunk_size is kept in one chunk.
MAX_CHUNK_FACTOR = 1.5
#: Chunks with less new text than this fraction of chunk_size are merged into a neighbour.
MIN_CHUNK_FACTOR = 0.2


class MarkdownChunker(Chunker):
    """Split markdown (or plain text / code) into overlapping, heading-aware chunks.

    `chunk_size` and `overlap` are in characters; see the module docstring for the rules.
    `mode="text"` skips heading and fence detection; `mode="code"` also skips sentence breaks.
    """

    def __init__(self, chunk_size: int = 1000, overlap: int = 150, *, mode: ChunkMode = "markdown") -> None:
        if chunk_size < 1:
            raise InvalidArgument(
                f"chunk_size must be at least 1, got {chunk_size}",
                suggestion="Set ARCHIVIST_CHUNK_SIZE to a positive number of characters (default 1000).",
            )
        if not 0 <= overlap < chunk_size:
            raise InvalidArgument(
                f"chunk overlap must be between 0 and chunk_size - 1 ({chunk_size - 1}), got {overlap}",
                suggestion="Set ARCHIVIST_CHUNK_OVERLAP below ARCHIVIST_CHUNK_SIZE (default 150).",
            )
        self.chunk_size = chunk_size
        self.overlap = overlap
        self.mode: ChunkMode = mode
        self.max_chunk = int(chunk_size * MAX_CHUNK_FACTOR)
        self.min_chunk = int(chunk_size * MIN_CHUNK_FACTOR)

    def chunk(self, content: str) -> list[Chunk]:
        """Split content into chunks; empty or whitespace-only content gives []."""
        if not content.strip():
            return []
        layout = Scanner(content, self.mode, self.max_chunk).scan()
        chunks: list[Chunk] = []
        for index, section in enumerate(layout.sections):
            section_end = layout.sections[index + 1].start if index + 1 < len(layout.sections) else len(content)
            start = skip_whitespace(content, section.start, section_end)
            end = trim_end(content, start, section_end)
            for span in self._chunk_section(layout, start, end):
                chunks.append(Chunk(content[span.start : span.end], span.start, span.end, list(section.path)))
        logger.debug("chunked %d characters into %d chunks", len(content), len(chunks))
        return chunks

    # --- one section -------------------------------------------------------------------------

    def _chunk_section(self, layout: Layout, start: int, end: int) -> list[Span]:
        """Cut the non-blank section [start, end) into spans with overlap, then merge small ones."""
        if end - start <= self.chunk_size:
            return [Span(start, start, end)] if end > start else []
        content = layout.content
        spans: list[Span] = []
        position = start
        while position < end:
            chunk_start = self._overlap_start(layout, spans[-1], position, start) if spans else position
            cut = self._find_cut(layout, position, chunk_start, end)
            if cut - chunk_start > self.max_chunk:  # an oversized code block: drop the overlap
                chunk_start = position
            spans.append(Span(chunk_start, position, trim_end(content, position, cut)))
            position = skip_whitespace(content, cut, end)
        return self._merge_small(spans)

    def _find_cut(self, layout: Layout, position: int, chunk_start: int, end: int) -> int:
        """Where the chunk holding new text from `position` (and starting at chunk_start) ends."""
        limit = chunk_start + self.chunk_size
        if end <= limit:
            return end
        atom = atom_containing(layout, limit)
        if atom is not None:
            atom_start, atom_end = atom
            if atom_start <= position:
                return atom_end  # the chunk starts with a kept-whole block: take all of it
            limit = atom_start  # never cut inside it; its start is a paragraph break
        middle = position + (limit - position) // 2
        for low, high in ((middle, limit), (position, middle)):
            cut = strongest_break(layout, low, high)
            if cut is None:
                cut = last_whitespace_break(layout.content, low, high)
            if cut is not None:
                return cut
        return limit

    def _overlap_start(self, layout: Layout, previous: Span, position: int, section_start: int) -> int:
        """Start of a chunk whose new text begins at `position`: up to `overlap` chars earlier."""
        content = layout.content
        # Whitespace skipped between the chunks counts towards the overlap budget.
        low = max(previous.end - self.overlap, position - self.overlap, previous.new_start + 1, section_start)
        atom = atom_containing(layout, low)
        if atom is not None:
            low = atom[1]
        if low >= previous.end:
            return position
        candidate = first_break(layout, low, previous.end)
        if candidate is None:
            candidate = first_word_start(content, low, previous.end)
        if candidate is None:
            return position
        candidate = skip_whitespace(content, candidate, position)
        return min(candidate, position)

    def _merge_small(self, spans: list[Span]) -> list[Span]:
        """Merge spans with little new text into the previous (else next) span when that fits."""
        merged: list[Span] = []
        carried: Span | None = None
        for index, span in enumerate(spans):
            if carried is not None:
                span.start, span.new_start, carried = carried.start, carried.new_start, None
            if span.end - span.new_start < self.min_chunk and len(spans) > 1:
                if merged and span.end - merged[-1].start <= self.max_chunk:
                    merged[-1].end = span.end
                    continue
                following = spans[index + 1] if index + 1 < len(spans) else None
                if following is not None and following.end - span.start <= self.max_chunk:
                    carried = span
                    continue
            merged.append(span)
        return merged
