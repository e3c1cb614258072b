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
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Literal

from services.chunking.base import Chunk, Chunker
from services.errors import InvalidArgument

logger = logging.getLogger(__name__)

#: "markdown": headings, code fences and sentences; "text": sentences only; "code": lines only.
ChunkMode = Literal["markdown", "text", "code"]

#: A code block up to this multiple of chunk_size is kept in one chunk.
MAX_CHUNK_FACTOR = 1.5
#: Chunks with less new text than this fraction of chunk_size are merged into a neighbour.
MIN_CHUNK_FACTOR = 0.2

_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE_OPEN_RE = re.compile(r"^ {0,3}(`{3,}(?=[^`]*$)|~{3,})")
_FENCE_CLOSE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
#: Lines that might open a heading or a fence (checked further in Python).
_BLOCK_START_RE = re.compile(r"^ {0,3}(?:#|```|~~~)", re.MULTILINE)
#: A blank line; a break after it starts a paragraph.
_BLANK_LINE_RE = re.compile(r"\n[ \t\r\f\v]*\n")
_SENTENCE_END_RE = re.compile(r"[.!?…]+['\"’”)\]]*\s+(?=\S)|[。！？]+[」』”’）]*\s*(?=\S)")
_NON_WHITESPACE_RE = re.compile(r"\S")
_WHITESPACE_RE = re.compile(r"\s+")


@dataclass(slots=True)
class _Section:
    start: int
    heading_end: int  # end of the heading line; == start for text before the first heading
    level: int  # 0 for text before the first heading
    path: list[str]


@dataclass(slots=True)
class _Span:
    start: int  # where the chunk text starts (including overlap)
    new_start: int  # where text not in the previous chunk starts
    end: int


@dataclass(slots=True)
class _Layout:
    """Sections and fenced code blocks of one document; break points are found on demand."""

    content: str
    sentences: bool  # whether sentence ends are break points (not in "code" mode)
    sections: list[_Section] = field(default_factory=list)
    fence_starts: list[int] = field(default_factory=list)
    fence_ends: list[int] = field(default_factory=list)
    fence_kept_whole: list[bool] = field(default_factory=list)
    atom_starts: list[int] = field(default_factory=list)
    atom_ends: list[int] = field(default_factory=list)


def _skip_whitespace(content: str, position: int, end: int) -> int:
    """First non-whitespace position in [position, end), or end."""
    if position < end and not content[position].isspace():
        return position
    match = _NON_WHITESPACE_RE.search(content, position, end)
    return match.start() if match else end


def _trim_end(content: str, start: int, end: int) -> int:
    """Move `end` left past trailing whitespace, not before `start`."""
    while end > start and content[end - 1].isspace():
        end -= 1
    return end


def _is_sentence_end(content: str, punctuation_start: int) -> bool:
    """False for list markers ("1.", "a)") and abbreviations ("e.g."), True otherwise."""
    tail = content[max(0, punctuation_start - 4) : punctuation_start]
    if not tail.strip():
        return True
    token = tail.split()[-1]
    token_is_whole = len(token) < len(tail) or punctuation_start == len(token)
    if not token_is_whole:
        return True  # a word of 4+ characters
    return not (token.isdigit() or len(token) == 1 or "." in token)


def _heading(line: str) -> tuple[int, str] | None:
    """(level, text) if the line is an ATX heading."""
    match = _HEADING_RE.match(line)
    if match is None:
        return None
    return len(match.group(1)), (match.group(2) or "").strip()


class _Scanner:
    """Find the headings and fenced code blocks of a document, building its `_Layout`.

    Only lines that could open a heading or fence (found by one regex pass) are looked at in
    Python, so scanning stays fast however many lines the document has.
    """

    def __init__(self, content: str, mode: ChunkMode, max_atom: int) -> None:
        self.content = content
        self.layout = _Layout(content, sentences=mode != "code", sections=[_Section(0, 0, 0, [])])
        self.markdown = mode == "markdown"
        self.max_atom = max_atom
        self.stack: list[tuple[int, str]] = []

    def scan(self) -> _Layout:
        """Scan the block structure (markdown mode only) and return the layout."""
        if self.markdown:
            self._scan_blocks()
            self.layout.sections = self._merge_heading_only_sections()
        return self.layout

    def _scan_blocks(self) -> None:
        content = self.content
        fence: str | None = None
        fence_start = 0
        for match in _BLOCK_START_RE.finditer(content):
            line_start = match.start()
            line_end = content.find("\n", line_start)
            line = content[line_start : len(content) if line_end < 0 else line_end].rstrip("\r")
            if fence is not None:
                closing = _FENCE_CLOSE_RE.match(line)
                if closing and closing.group(1)[0] == fence[0] and len(closing.group(1)) >= len(fence):
                    self._add_fence(fence_start, line_start + len(line.rstrip()))
                    fence = None
                continue
            if line.lstrip(" ")[0] != "#":
                opening = _FENCE_OPEN_RE.match(line)
                if opening:
                    fence, fence_start = opening.group(1), line_start
                continue
            heading = _heading(line)
            if heading:
                self._open_section(line_start, line_start + len(line), *heading)
        if fence is not None:  # unclosed fence: runs to the end of the document (CommonMark)
            self._add_fence(fence_start, _trim_end(content, fence_start, len(content)))

    def _add_fence(self, start: int, end: int) -> None:
        """Record a fenced block; it is kept whole when it fits in 1.5 x chunk_size."""
        kept_whole = end - start <= self.max_atom
        self.layout.fence_starts.append(start)
        self.layout.fence_ends.append(end)
        self.layout.fence_kept_whole.append(kept_whole)
        if kept_whole:
            self.layout.atom_starts.append(start)
            self.layout.atom_ends.append(end)

    def _open_section(self, start: int, heading_end: int, level: int, text: str) -> None:
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        self.stack.append((level, text))
        path = [title for _, title in self.stack if title]
        self.layout.sections.append(_Section(start, heading_end, level, path))

    def _merge_heading_only_sections(self) -> list[_Section]:
        """Fold a section that is only its heading into the deeper section right after it."""
        sections = self.layout.sections
        merged: list[_Section] = []
        carried_start: int | None = None
        for index, section in enumerate(sections):
            if carried_start is not None:
                section.start, carried_start = carried_start, None
            following = sections[index + 1] if index + 1 < len(sections) else None
            if (
                following is not None
                and 0 < section.level < following.level
                and _skip_whitespace(self.content, section.heading_end, following.start) == following.start
            ):
                carried_start = section.start
                continue
            merged.append(section)
        return merged


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
        layout = _Scanner(content, self.mode, self.max_chunk).scan()
        chunks: list[Chunk] = []
        for index, section in enumerate(layout.sections):
            section_end = layout.sections[index + 1].start if index + 1 < len(layout.sections) else len(content)
            start = _skip_whitespace(content, section.start, section_end)
            end = _trim_end(content, start, section_end)
            for span in self._chunk_section(layout, start, end):
                chunks.append(Chunk(content[span.start : span.end], span.start, span.end, list(section.path)))
        logger.debug("chunked %d characters into %d chunks", len(content), len(chunks))
        return chunks

    # --- one section -------------------------------------------------------------------------

    def _chunk_section(self, layout: _Layout, start: int, end: int) -> list[_Span]:
        """Cut the non-blank section [start, end) into spans with overlap, then merge small ones."""
        if end - start <= self.chunk_size:
            return [_Span(start, start, end)] if end > start else []
        content = layout.content
        spans: list[_Span] = []
        position = start
        while position < end:
            chunk_start = self._overlap_start(layout, spans[-1], position, start) if spans else position
            cut = self._find_cut(layout, position, chunk_start, end)
            if cut - chunk_start > self.max_chunk:  # an oversized code block: drop the overlap
                chunk_start = position
            spans.append(_Span(chunk_start, position, _trim_end(content, position, cut)))
            position = _skip_whitespace(content, cut, end)
        return self._merge_small(spans)

    def _find_cut(self, layout: _Layout, position: int, chunk_start: int, end: int) -> int:
        """Where the chunk holding new text from `position` (and starting at chunk_start) ends."""
        limit = chunk_start + self.chunk_size
        if end <= limit:
            return end
        atom = _atom_containing(layout, limit)
        if atom is not None:
            atom_start, atom_end = atom
            if atom_start <= position:
                return atom_end  # the chunk starts with a kept-whole block: take all of it
            limit = atom_start  # never cut inside it; its start is a paragraph break
        middle = position + (limit - position) // 2
        for low, high in ((middle, limit), (position, middle)):
            cut = _strongest_break(layout, low, high)
            if cut is None:
                cut = _last_whitespace_break(layout.content, low, high)
            if cut is not None:
                return cut
        return limit

    def _overlap_start(self, layout: _Layout, previous: _Span, position: int, section_start: int) -> int:
        """Start of a chunk whose new text begins at `position`: up to `overlap` chars earlier."""
        content = layout.content
        # Whitespace skipped between the chunks counts towards the overlap budget.
        low = max(previous.end - self.overlap, position - self.overlap, previous.new_start + 1, section_start)
        atom = _atom_containing(layout, low)
        if atom is not None:
            low = atom[1]
        if low >= previous.end:
            return position
        candidate = _first_break(layout, low, previous.end)
        if candidate is None:
            candidate = _first_word_start(content, low, previous.end)
        if candidate is None:
            return position
        candidate = _skip_whitespace(content, candidate, position)
        return min(candidate, position)

    def _merge_small(self, spans: list[_Span]) -> list[_Span]:
        """Merge spans with little new text into the previous (else next) span when that fits."""
        merged: list[_Span] = []
        carried: _Span | None = None
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


# --- break points, found on demand within a window -----------------------------------------------


@dataclass(slots=True)
class _Window:
    """A range of text split around fenced code: searchable segments and fence boundaries.

    `segments` are (start, end, inside_fence) ranges in order; the inside of a kept-whole
    block is left out. `boundaries` are fence starts/ends in the range: paragraph breaks.
    """

    segments: list[tuple[int, int, bool]]
    boundaries: list[int]


def _window(layout: _Layout, low: int, high: int) -> _Window:
    """Split [low, high) around the fenced blocks that intersect it."""
    segments: list[tuple[int, int, bool]] = []
    boundaries: list[int] = []
    cursor = low
    index = bisect_right(layout.fence_ends, low)
    while index < len(layout.fence_starts) and layout.fence_starts[index] < high:
        fence_start, fence_end = layout.fence_starts[index], layout.fence_ends[index]
        if fence_start > cursor:
            segments.append((cursor, fence_start, False))
        boundaries.extend(position for position in (fence_start, fence_end) if low <= position <= high)
        if not layout.fence_kept_whole[index]:
            segments.append((max(fence_start, cursor), min(fence_end, high), True))
        cursor = max(cursor, fence_end)
        index += 1
    if cursor < high:
        segments.append((cursor, high, False))
    return _Window(segments, boundaries)


def _last_paragraph_start(content: str, low: int, high: int) -> int | None:
    """The position after the last blank line in [low, high), if any."""
    last = None
    for match in _BLANK_LINE_RE.finditer(content, low, high):
        last = match.end()
    return last


def _last_sentence_start(content: str, low: int, high: int) -> int | None:
    """The start of the last sentence beginning in (low, high), if any."""
    last = None
    for match in _SENTENCE_END_RE.finditer(content, low, high):
        if _is_sentence_end(content, match.start()):
            last = match.end()
    return last


def _first_sentence_start(content: str, low: int, high: int) -> int | None:
    """The start of the first sentence beginning in (low, high), if any."""
    for match in _SENTENCE_END_RE.finditer(content, low, high):
        if _is_sentence_end(content, match.start()):
            return match.end()
    return None


def _strongest_break(layout: _Layout, low: int, high: int) -> int | None:
    """The best place in (low, high] to end a chunk, or None.

    Paragraph starts and fence boundaries beat line and sentence starts; the latest wins
    among equals. Never inside a kept-whole code block; no sentence breaks inside code.
    """
    content = layout.content
    window = _window(layout, low, high)
    best = max((position for position in window.boundaries if position > low), default=None)
    for start, end, _ in reversed(window.segments):
        if best is not None and end <= best:
            break
        paragraph = _last_paragraph_start(content, start, end)
        if paragraph is not None:
            best = paragraph if best is None else max(best, paragraph)
            break
    if best is not None:
        return best
    for start, end, inside_fence in reversed(window.segments):
        line = content.rfind("\n", start, end) + 1 or None
        sentence = _last_sentence_start(content, start, end) if layout.sentences and not inside_fence else None
        candidates = [position for position in (line, sentence) if position is not None and position > low]
        if candidates:
            return max(candidates)
    return None


def _first_break(layout: _Layout, low: int, high: int) -> int | None:
    """The earliest line start, sentence start or fence boundary in [low, high), or None."""
    content = layout.content
    window = _window(layout, low, high)
    candidates = [position for position in window.boundaries if position < high]
    for start, end, inside_fence in window.segments:
        if start == 0 or content[start - 1] == "\n":
            candidates.append(start)
        newline = content.find("\n", start, end)
        if newline >= 0 and newline + 1 < high:
            candidates.append(newline + 1)
        if layout.sentences and not inside_fence:
            sentence = _first_sentence_start(content, start, end)
            if sentence is not None and sentence < high:
                candidates.append(sentence)
        if candidates:
            break  # later segments only hold later positions
    return min(candidates, default=None)


def _atom_containing(layout: _Layout, position: int) -> tuple[int, int] | None:
    """The kept-whole span strictly containing `position` (start < position < end), if any."""
    index = bisect_left(layout.atom_starts, position) - 1
    if index >= 0 and layout.atom_ends[index] > position:
        return layout.atom_starts[index], layout.atom_ends[index]
    return None


def _last_whitespace_break(content: str, low: int, high: int) -> int | None:
    """The position just after the last whitespace character in [low, high), if any (> low)."""
    last = max(content.rfind(" ", low, high), content.rfind("\n", low, high), content.rfind("\t", low, high))
    return last + 1 if last >= low else None


def _first_word_start(content: str, low: int, high: int) -> int | None:
    """The earliest position in [low, high) that starts a word (follows whitespace)."""
    if low > 0 and content[low - 1].isspace():
        return low
    match = _WHITESPACE_RE.search(content, low, high)
    return match.end() if match and match.end() < high else None
