"""Markdown line primitives in linear time: ATX headings, list items and inline links.

These read user and crawled text, so they are written with `str` methods instead of regexes: a
pattern such as `^#+\\s+(.+?)\\s*#*\\s*$` backtracks in cubic time on "# a" + 4,000 spaces + "x"
(73 s, holding the GIL). Every function here looks at each character a bounded number of times.
"""

from __future__ import annotations

_BLANKS = " \t"


def atx_heading(line: str, *, max_indent: int = 3) -> tuple[int, str] | None:
    """(level, text) when `line` is a CommonMark ATX heading, else None.

    Up to `max_indent` leading spaces, 1 to 6 `#`, then a space, a tab or the end of the line.
    The closing `#` run is dropped when a blank precedes it (`# C#` keeps its `#`); the text is
    stripped and may be empty (`#` alone is an empty heading).
    """
    body = line.rstrip("\r\n")
    unindented = body.lstrip(" ")
    if len(body) - len(unindented) > max_indent:
        return None
    rest = unindented.lstrip("#")
    level = len(unindented) - len(rest)
    if not 1 <= level <= 6 or (rest and rest[0] not in _BLANKS):
        return None
    return level, _without_closing_run(rest.strip(_BLANKS)).strip()


def _without_closing_run(text: str) -> str:
    """`text` without a closing `#` run that follows a blank (or that is all of it)."""
    kept = text.rstrip("#")
    if not kept or kept == text:
        return kept
    return kept.rstrip(_BLANKS) if kept[-1] in _BLANKS else text


def starts_like_markdown(line: str) -> bool:
    """Whether a line opens a heading (`# `), a code fence (```) or a list item (`- `, `* `)."""
    if line.startswith("```"):
        return True
    rest = line.lstrip("#")
    level = len(line) - len(rest)
    if 1 <= level <= 6 and (not rest or rest[0].isspace()):
        return True
    item = line.lstrip()
    return bool(item) and item[0] in "-*" and (len(item) == 1 or item[1].isspace())


def has_inline_link(text: str) -> bool:
    """Whether `text` holds a markdown inline link `[label](target)` (label and target non-empty)."""
    last_close = text.rfind(")")
    position = text.find("](")
    while position != -1:
        label_start = text.rfind("]", 0, position) + 1
        opening = text.rfind("[", label_start, position - 1)
        target = position + 2
        if opening != -1 and target < last_close and text[target] != ")":
            return True
        position = text.find("](", position + 2)
    return False
