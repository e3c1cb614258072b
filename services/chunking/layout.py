"""The layout of one markdown (or text / code) document for `services.chunking.markdown`: its sections
(heading paths), fenced code blocks and the blocks kept whole, found in one scan; offsets only."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from services.core.markdown_lines import atx_heading

#: "markdown": headings, code fences and sentences; "text": sentences only; "code": lines only.
ChunkMode = Literal["markdown", "text", "code"]

FENCE_OPEN_RE = re.compile(r"^ {0,3}(`{3,}(?=[^`]*$)|~{3,})")
FENCE_CLOSE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
#: Lines that might open a heading or a fence (checked further in Python).
BLOCK_START_RE = re.compile(r"^ {0,3}(?:#|```|~~~)", re.MULTILINE)
#: A blank line; a break after it starts a paragraph.
BLANK_LINE_RE = re.compile(r"\n[ \t\r\f\v]*\n")
#: A sentence end: punctuation, closing quotes, then a space. The look-behinds start a match only at the
#: start of a punctuation run, so a run of 10,000 dots is scanned once instead of once per dot.
SENTENCE_END_RE = re.compile(r"(?<![.!?…])[.!?…]+['\"’”)\]]*\s+(?=\S)|(?<![。！？])[。！？]+[」』”’）]*\s*(?=\S)")
NON_WHITESPACE_RE = re.compile(r"\S")
WHITESPACE_RE = re.compile(r"\s+")


@dataclass(slots=True)
class Section:
    start: int
    heading_end: int  # end of the heading line; == start for text before the first heading
    level: int  # 0 for text before the first heading
    path: list[str]


@dataclass(slots=True)
class Span:
    start: int  # where the chunk text starts (including overlap)
    new_start: int  # where text not in the previous chunk starts
    end: int


@dataclass(slots=True)
class Layout:
    """Sections and fenced code blocks of one document; break points are found on demand."""

    content: str
    sentences: bool  # whether sentence ends are break points (not in "code" mode)
    sections: list[Section] = field(default_factory=list)
    fence_starts: list[int] = field(default_factory=list)
    fence_ends: list[int] = field(default_factory=list)
    fence_kept_whole: list[bool] = field(default_factory=list)
    atom_starts: list[int] = field(default_factory=list)
    atom_ends: list[int] = field(default_factory=list)


def skip_whitespace(content: str, position: int, end: int) -> int:
    """First non-whitespace position in [position, end), or end."""
    if position < end and not content[position].isspace():
        return position
    match = NON_WHITESPACE_RE.search(content, position, end)
    return match.start() if match else end


def trim_end(content: str, start: int, end: int) -> int:
    """Move `end` left past trailing whitespace, not before `start`."""
    while end > start and content[end - 1].isspace():
        end -= 1
    return end


def is_sentence_end(content: str, punctuation_start: int) -> bool:
    """False for list markers ("1.", "a)") and abbreviations ("e.g."), True otherwise."""
    tail = content[max(0, punctuation_start - 4) : punctuation_start]
    if not tail.strip():
        return True
    token = tail.split()[-1]
    token_is_whole = len(token) < len(tail) or punctuation_start == len(token)
    if not token_is_whole:
        return True  # a word of 4+ characters
    return not (token.isdigit() or len(token) == 1 or "." in token)


def parse_heading(line: str) -> tuple[int, str] | None:
    """(level, text) if the line is an ATX heading (services.core.markdown_lines, linear time)."""
    return atx_heading(line)


class Scanner:
    """Find the headings and fenced code blocks of a document, building its `Layout`.

    Only lines that could open a heading or fence (found by one regex pass) are looked at in
    Python, so scanning stays fast however many lines the document has.
    """

    def __init__(self, content: str, mode: ChunkMode, max_atom: int) -> None:
        self.content = content
        self.layout = Layout(content, sentences=mode != "code", sections=[Section(0, 0, 0, [])])
        self.markdown = mode == "markdown"
        self.max_atom = max_atom
        self.stack: list[tuple[int, str]] = []

    def scan(self) -> Layout:
        """Scan the block structure (markdown mode only) and return the layout."""
        if self.markdown:
            self._scan_blocks()
            self.layout.sections = self._merge_heading_only_sections()
        return self.layout

    def _scan_blocks(self) -> None:
        content = self.content
        fence: str | None = None
        fence_start = 0
        for match in BLOCK_START_RE.finditer(content):
            line_start = match.start()
            line_end = content.find("\n", line_start)
            line = content[line_start : len(content) if line_end < 0 else line_end].rstrip("\r")
            if fence is not None:
                closing = FENCE_CLOSE_RE.match(line)
                if closing and closing.group(1)[0] == fence[0] and len(closing.group(1)) >= len(fence):
                    self._add_fence(fence_start, line_start + len(line.rstrip()))
                    fence = None
                continue
            if line.lstrip(" ")[0] != "#":
                opening = FENCE_OPEN_RE.match(line)
                if opening:
                    fence, fence_start = opening.group(1), line_start
                continue
            heading = parse_heading(line)
            if heading:
                self._open_section(line_start, line_start + len(line), *heading)
        if fence is not None:  # unclosed fence: runs to the end of the document (CommonMark)
            self._add_fence(fence_start, trim_end(content, fence_start, len(content)))

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
        self.layout.sections.append(Section(start, heading_end, level, path))

    def _merge_heading_only_sections(self) -> list[Section]:
        """Fold a section that is only its heading into the deeper section right after it."""
        sections = self.layout.sections
        merged: list[Section] = []
        carried_start: int | None = None
        for index, section in enumerate(sections):
            if carried_start is not None:
                section.start, carried_start = carried_start, None
            following = sections[index + 1] if index + 1 < len(sections) else None
            if (
                following is not None
                and 0 < section.level < following.level
                and skip_whitespace(self.content, section.heading_end, following.start) == following.start
            ):
                carried_start = section.start
                continue
            merged.append(section)
        return merged
