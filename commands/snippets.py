"""What a search hit shows on the terminal: the part of the passage that matches, cut at words.

A passage is up to a few thousand characters; its first 200 rarely hold the words searched for. The
shown window is the stretch of SNIPPET_CHARS with the most distinct query words (3+ letters, matched at
a word's start with any ending, as the console highlights them), widened to word boundaries, with an
ellipsis where text was left out. The scan is linear: one pass of a literal alternation over the text,
then two pointers over the matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SNIPPET_CHARS = 240
LEAD_CHARS = 50  # context kept before the first match of the window
MAX_TERMS = 20


def query_terms(query: str) -> list[str]:
    """The query's words of 3+ letters, longest first (so a longer word wins the alternation)."""
    words = {w.lower() for w in re.findall(r"\w{3,}", query or "")}
    return sorted(words, key=len, reverse=True)[:MAX_TERMS]


@dataclass(frozen=True)
class Snippet:
    text: str
    spans: list[tuple[int, int]]  # the matched words, as offsets into `text`


def matches(text: str, terms: list[str]) -> list[tuple[int, int, str]]:
    if not terms:
        return []
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(t) for t in terms) + r")\w*", re.IGNORECASE)
    return [(m.start(), m.end(), m.group().lower()) for m in pattern.finditer(text)]


def best_start(found: list[tuple[int, int, str]], width: int) -> int:
    """The offset of the first match of the window (width chars) holding the most distinct words."""
    best, best_count, left = 0, 0, 0
    counts: dict[str, int] = {}
    for start, _, word in found:
        counts[word] = counts.get(word, 0) + 1
        while start - found[left][0] > width:
            gone = found[left][2]
            counts[gone] -= 1
            if not counts[gone]:
                del counts[gone]
            left += 1
        if len(counts) > best_count:
            best, best_count = found[left][0], len(counts)
    return best


def word_start(text: str, at: int) -> int:
    """`at`, moved back to the start of the word it falls in."""
    space = text.rfind(" ", 0, at + 1)
    return 0 if space < 0 else space + 1


def word_end(text: str, at: int) -> int:
    """`at`, moved back to the end of the last whole word before it (or `at` if none)."""
    if at >= len(text):
        return len(text)
    space = text.rfind(" ", 0, at + 1)
    return at if space <= 0 else space


def snippet(passage: str, query: str, width: int = SNIPPET_CHARS) -> Snippet:
    """The matching window of `passage` (whitespace collapsed), with its matched words' spans."""
    text = " ".join(passage.split())
    found = matches(text, query_terms(query))
    first = best_start(found, width - LEAD_CHARS) if found else 0
    start = word_start(text, max(0, first - LEAD_CHARS)) if first > LEAD_CHARS else 0
    end = word_end(text, start + width)
    prefix, suffix = ("…" if start > 0 else ""), ("…" if end < len(text) else "")
    shift = len(prefix) - start
    spans = [(s + shift, e + shift) for s, e, _ in found if s >= start and e <= end]
    return Snippet(prefix + text[start:end] + suffix, spans)
