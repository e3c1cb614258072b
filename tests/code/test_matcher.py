"""A block of the line index is searched whole (one RE2 call per matching line) and finds exactly the
lines a line-by-line search finds: anchors, word boundaries, a match that would run over a newline,
case, literals, non-ASCII text, a long line's pieces, and patterns that must go line by line."""

from __future__ import annotations

import re

import pytest

from services.code.lines import LINE_CAP, blocks, split_lines
from services.code.matcher import LineMatcher

TEXT = "\n".join(
    [
        "import os",
        "import osx  # not os alone",
        "",
        "def café(self, x):",
        "    return None",
        "    ",
        "class ValueError_(Exception): pass",
        "x = 'déjà vu'  # déjà",
        "    )",
        "assert 12345 == f(1)",
        "raise ValueError('no')",
        "OS = 'upper'",
        "end",
    ]
)
PATTERNS = [
    r"^import os$", r"os", r"\bos\b", r"^\s*\)$", r"\s+return", r"[^a]", r"\d{5}", r"déjà", r"é\w*\(",
    r"(?i)OS", r"^$", r"$", r"^", r"Value\w*\(", r"return None$", r"\Aimport", r"end\z", r"(?i:os)(?-i:x)",
    r"a\s*\n?\s*b", r"x\s+=",
]  # fmt: skip


def per_line(pattern: str, text: str, literal: bool = False, case: bool = True) -> list[tuple[int, int]]:
    """(line, start) of each line's first match, by Python's `re` over each line alone."""
    rx = re.compile(re.escape(pattern) if literal else pattern.replace(r"\z", r"\Z"), 0 if case else re.I)
    return [(n, m.start()) for n, line in enumerate(split_lines(text), 1) if (m := rx.search(line))]


def block_hits(matcher: LineMatcher, text: str) -> list[tuple[int, int]]:
    out = []
    for start, end, body in blocks(text):
        for found in matcher.lines(start, end, body):
            line, at = found.line()
            out.append((found.number, at))
    return out


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_block_finds_the_lines_each_line_alone_finds(pattern: str) -> None:
    assert block_hits(LineMatcher(pattern, False, True), TEXT) == per_line(pattern, TEXT)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_blocks_count_is_the_lines_each_line_alone_finds(pattern: str) -> None:
    matcher = LineMatcher(pattern, False, True)
    counted = sum(matcher.count(start, end, body) for start, end, body in blocks(TEXT))
    assert counted == len(per_line(pattern, TEXT))


def test_literals_and_case() -> None:
    assert block_hits(LineMatcher("os'", True, True), TEXT) == per_line("os'", TEXT, literal=True)
    assert block_hits(LineMatcher("valueerror", False, False), TEXT) == per_line("valueerror", TEXT, case=False)
    assert block_hits(LineMatcher("a.b", True, True), "a.b\naxb\n") == [(1, 0)]


def test_many_blocks_and_a_long_lines_pieces() -> None:
    text = "\n".join(f"line {i} needle" if i % 7 == 0 else f"line {i}" for i in range(3000))
    assert block_hits(LineMatcher(r"needle$", False, True), text) == per_line(r"needle$", text)
    matcher = LineMatcher(r"needle$", False, True)
    assert sum(matcher.count(*block) for block in blocks(text)) == len(per_line(r"needle$", text))
    long_line = "x" * (LINE_CAP * 3) + "needle" + "y" * 100
    hits = block_hits(LineMatcher("needle", False, True), f"short\n{long_line}\nneedle\n")
    assert {n for n, _ in hits} == {2, 3}  # the long line's pieces may each hold it: the caller counts it once
