"""Which lines of a stored block an RE2 pattern matches (grep, services/code/grep.py).

A block of the line index (services/code/lines.py) is read as UTF-8 bytes and searched whole in
multi-line mode: one RE2 call finds the leftmost match, the line holding it is a hit, and the search
resumes at the next line. So a block costs one call per matching line plus one, not one per line
(a block of 200 lines matching twice: 3 calls instead of 200). A whole-block match is a line match
when it stays inside its line (`^`, `$` and `\\b` mean the same at a line's ends inside a block as at
a lone line's); one that runs over a newline (`\\s+`, `[^x]`) is checked against its line alone. A
pattern whose meaning changes over a block (`\\A`, `\\z`, a flag turned off) goes line by line.
A long line's block (its pieces, services/code/lines.py) is read piece by piece; the caller counts a
line once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import re2

from services.code.lines import segments
from services.core.errors import InvalidArgument

MAX_PATTERN = 1000
RE2_MEMORY = 64 << 20
#: what changes meaning over a whole block (\\A, \\z, a flag turned off): such patterns go line by line
BLOCK_UNSAFE = re2.compile(r"\\[Az]|\(\?[a-zA-Z]*-")


@dataclass(frozen=True, slots=True)
class Found:
    """A matching line: its number, and where it and the match sit in the block's bytes."""

    number: int
    data: bytes  # the block (or piece) as UTF-8
    begin: int  # the line's bytes are data[begin:end]
    end: int
    at: int  # where the match starts, in bytes from `begin`

    def line(self) -> tuple[str, int]:
        """The line's text, and where the match starts in it (in characters)."""
        raw = self.data[self.begin : self.end]
        return raw.decode(), len(raw[: self.at].decode(errors="ignore"))


class LineMatcher:
    """The pattern compiled by RE2 for single lines, and for whole blocks when that is equivalent."""

    def __init__(self, pattern: str, literal: bool, case_sensitive: bool) -> None:
        if not pattern or len(pattern) > MAX_PATTERN:
            raise InvalidArgument(
                f"grep needs a pattern of 1 to {MAX_PATTERN} characters.", "Pass query='def send' or a regex."
            )
        options = re2.Options()
        options.case_sensitive = case_sensitive
        options.literal = literal
        options.max_mem = RE2_MEMORY
        options.log_errors = False
        try:
            self.line = re2.compile(pattern, options)
            blockwise = literal or BLOCK_UNSAFE.search(pattern) is None
            self.block = self.line if literal else re2.compile(f"(?m:{pattern})", options) if blockwise else None
        except re2.error as exc:
            raise InvalidArgument(
                f"query is not an RE2 regular expression: {str(exc)[:200]}.",
                "Fix the pattern (RE2 syntax: no backreferences or lookaround), or pass literal=true.",
            ) from None

    def lines(self, line_start: int, line_end: int, text: str) -> Iterator[Found]:
        """The block's matching lines, in order (a long line's block: each matching piece)."""
        if self.block is None or (line_start == line_end and "\n" in text):
            for number, piece in segments(line_start, line_end, text):
                data = piece.encode()
                found = self.line.search(data)
                if found is not None:
                    yield Found(number, data, 0, len(data), found.start())
            return
        yield from self._block_lines(line_start, text.encode())

    def count(self, line_start: int, line_end: int, text: str) -> int:
        """How many lines of the block match: what `lines` finds, without building each (a common
        pattern's count past the page has hundreds of matching lines; each Found cost more than its
        search). A long line's block: its number once if any piece matches."""
        if self.block is None or line_start == line_end:
            return len({found.number for found in self.lines(line_start, line_end, text)})
        data = text.encode()
        pos, counted, size = 0, 0, len(data)
        while pos <= size:
            found = self.block.search(data, pos)
            if found is None:
                break
            start, stop = found.span()
            end = data.find(b"\n", start)
            end = size if end < 0 else end
            if data.find(b"\n", start, stop) < 0:
                counted += 1
            else:  # ran over its line: the line alone decides
                counted += self.line.search(data[data.rfind(b"\n", 0, start) + 1 : end]) is not None
            pos = end + 1
        return counted

    def _block_lines(self, line_start: int, data: bytes) -> Iterator[Found]:
        assert self.block is not None
        pos, number, counted = 0, line_start, 0
        size = len(data)
        while pos <= size:
            found = self.block.search(data, pos)
            if found is None:
                return
            start, stop = found.span()
            begin = data.rfind(b"\n", 0, start) + 1
            end = data.find(b"\n", start)
            end = size if end < 0 else end
            at: int | None = start - begin
            if data.find(b"\n", start, stop) >= 0:  # ran over its line: the line alone decides
                alone = self.line.search(data[begin:end])
                at = None if alone is None else alone.start()
            if at is not None:
                number += data.count(b"\n", counted, begin)
                counted = begin
                yield Found(number, data, begin, end, at)
            pos = end + 1
