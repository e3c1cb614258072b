"""Where a chunk may end, for `services.chunking.markdown`: break points scored and found on demand
within a window of a document's `Layout` (paragraphs and fences 3, lines and sentences 2)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from services.chunking.layout import BLANK_LINE_RE, SENTENCE_END_RE, WHITESPACE_RE, Layout, is_sentence_end


@dataclass(slots=True)
class Window:
    """A range of text split around fenced code: searchable segments and fence boundaries.

    `segments` are (start, end, inside_fence) ranges in order; the inside of a kept-whole
    block is left out. `boundaries` are fence starts/ends in the range: paragraph breaks.
    """

    segments: list[tuple[int, int, bool]]
    boundaries: list[int]


def split_window(layout: Layout, low: int, high: int) -> Window:
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
    return Window(segments, boundaries)


def last_paragraph_start(content: str, low: int, high: int) -> int | None:
    """The position after the last blank line in [low, high), if any."""
    last = None
    for match in BLANK_LINE_RE.finditer(content, low, high):
        last = match.end()
    return last


def last_sentence_start(content: str, low: int, high: int) -> int | None:
    """The start of the last sentence beginning in (low, high), if any."""
    last = None
    for match in SENTENCE_END_RE.finditer(content, low, high):
        if is_sentence_end(content, match.start()):
            last = match.end()
    return last


def first_sentence_start(content: str, low: int, high: int) -> int | None:
    """The start of the first sentence beginning in (low, high), if any."""
    for match in SENTENCE_END_RE.finditer(content, low, high):
        if is_sentence_end(content, match.start()):
            return match.end()
    return None


def strongest_break(layout: Layout, low: int, high: int) -> int | None:
    """The best place in (low, high] to end a chunk, or None.

    Paragraph starts and fence boundaries beat line and sentence starts; the latest wins
    among equals. Never inside a kept-whole code block; no sentence breaks inside code.
    """
    content = layout.content
    window = split_window(layout, low, high)
    best = max((position for position in window.boundaries if position > low), default=None)
    for start, end, _ in reversed(window.segments):
        if best is not None and end <= best:
            break
        paragraph = last_paragraph_start(content, start, end)
        if paragraph is not None:
            best = paragraph if best is None else max(best, paragraph)
            break
    if best is not None:
        return best
    for start, end, inside_fence in reversed(window.segments):
        line = content.rfind("\n", start, end) + 1 or None
        sentence = last_sentence_start(content, start, end) if layout.sentences and not inside_fence else None
        candidates = [position for position in (line, sentence) if position is not None and position > low]
        if candidates:
            return max(candidates)
    return None


def first_break(layout: Layout, low: int, high: int) -> int | None:
    """The earliest line start, sentence start or fence boundary in [low, high), or None."""
    content = layout.content
    window = split_window(layout, low, high)
    candidates = [position for position in window.boundaries if position < high]
    for start, end, inside_fence in window.segments:
        if start == 0 or content[start - 1] == "\n":
            candidates.append(start)
        newline = content.find("\n", start, end)
        if newline >= 0 and newline + 1 < high:
            candidates.append(newline + 1)
        if layout.sentences and not inside_fence:
            sentence = first_sentence_start(content, start, end)
            if sentence is not None and sentence < high:
                candidates.append(sentence)
        if candidates:
            break  # later segments only hold later positions
    return min(candidates, default=None)


def atom_containing(layout: Layout, position: int) -> tuple[int, int] | None:
    """The kept-whole span strictly containing `position` (start < position < end), if any."""
    index = bisect_left(layout.atom_starts, position) - 1
    if index >= 0 and layout.atom_ends[index] > position:
        return layout.atom_starts[index], layout.atom_ends[index]
    return None


def last_whitespace_break(content: str, low: int, high: int) -> int | None:
    """The position just after the last whitespace character in [low, high), if any (> low)."""
    last = max(content.rfind(" ", low, high), content.rfind("\n", low, high), content.rfind("\t", low, high))
    return last + 1 if last >= low else None


def first_word_start(content: str, low: int, high: int) -> int | None:
    """The earliest position in [low, high) that starts a word (follows whitespace)."""
    if low > 0 and content[low - 1].isspace():
        return low
    match = WHITESPACE_RE.search(content, low, high)
    return match.end() if match and match.end() < high else None
