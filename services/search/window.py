"""The part of a passage a search result shows: a window centred on the best-matching span.

A passage (up to three merged chunks) is often longer than a result's text. Its first characters
hide the match when the term sits later (issue 29, point 2), so the window is chosen by the query:

1. The query and the passage are cut into words and names (`mock.patch.object`, `dirs_exist_ok`,
   `tokio::spawn` stay whole; their segments count too), lower-cased and stemmed with the Snowball
   stemmer of the keyword index's language (PostgreSQL's `english` is Snowball English), so
   "statements" in a question meets "statement" in the text.
2. Each query term weighs its rarity among the passages of this answer (a term in every passage
   tells them apart from nothing): ln(1 + passages / passages holding it).
3. Over the term occurrences, the span of at most `length` characters holding the largest weight of
   distinct terms wins (ties: more occurrences, then the earlier span); the window is centred on it,
   moved inside the passage and to word boundaries. No match: the passage's start.

Pure functions; linear in the passage (one regex pass, two pointers over the occurrences).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache

#: A word, or a name of words joined by `_`, `.` or `::` (each separator between two words).
TOKEN = re.compile(r"[^\W_]+(?:(?:_+|\.|::)[^\W_]+)*")
SEPARATORS = re.compile(r"_+|\.|::")
#: The separators of a dotted or namespaced name (snake_case names stay whole, as in the index).
PATH_SEPARATORS = re.compile(r"(\.|::)")
#: How far a window's edge may move to land on a word boundary.
SNAP = 30
#: Words whose stems (and tokens whose match keys) are remembered: Snowball in pure Python costs ~0.1 ms a word, and
#: every search stems every word of its passages (the same words, search after search).
STEM_CACHE = 50_000

Stem = Callable[[str], str]


@cache
def stemmer_for(language: str) -> Stem:
    """The Snowball stemmer of a text-search configuration's language (`english`, `german`, ...); none
    for `simple` or a language Snowball lacks."""
    import snowballstemmer

    name = language.rsplit(".", 1)[-1].lower()
    if name not in snowballstemmer.algorithms():
        return lambda word: word
    stem: Stem = lru_cache(maxsize=STEM_CACHE)(snowballstemmer.stemmer(name).stemWord)
    return stem


@lru_cache(maxsize=STEM_CACHE)
def keys(token: str, stem: Stem) -> frozenset[str]:
    """The forms a token matches by, as sql/030 indexes them: each of its words stemmed, and for a name
    the whole name lower-cased and each run of 2 to 4 of its dotted or namespaced segments."""
    lowered = token.lower()
    parts = [p for p in SEPARATORS.split(lowered) if p]
    out = {stem(p) for p in parts}
    if len(parts) > 1:
        out.add(lowered)
    pieces = PATH_SEPARATORS.split(lowered)  # segment, separator, segment, ...
    segments = len(pieces) // 2 + 1
    for i in range(segments):
        for j in range(i + 1, min(segments, i + 4)):
            out.add("".join(pieces[2 * i : 2 * j + 1]))
    return frozenset(out)


def query_keys(query: str, stem: Stem) -> set[str]:
    return {k for match in TOKEN.finditer(query) for k in keys(match.group(), stem)}


@dataclass(frozen=True)
class Occurrence:
    start: int
    end: int
    key: str


def occurrences(text: str, wanted: set[str], stem: Stem) -> list[Occurrence]:
    """Where the query's terms occur in `text`, in order (a name counts for each of its keys)."""
    found: list[Occurrence] = []
    for match in TOKEN.finditer(text):
        for key in keys(match.group(), stem) & wanted:
            found.append(Occurrence(match.start(), match.end(), key))
    return found


def term_weights(found: Sequence[list[Occurrence]]) -> dict[str, float]:
    """Each query term's rarity among the passages of one answer (their occurrences, one list a
    passage): ln(1 + passages / passages holding it)."""
    held = [{o.key for o in f} for f in found]
    n = max(len(found), 1)
    every = set().union(*held) if held else set()
    return {k: math.log(1 + n / sum(k in h for h in held)) for k in every}


def best_span(found: list[Occurrence], weights: dict[str, float], length: int) -> tuple[int, int] | None:
    """(start, end) of the occurrences within `length` characters carrying the most weight of distinct
    terms; ties go to more occurrences, then to the earlier span."""
    best: tuple[float, int, int] | None = None
    span: tuple[int, int] | None = None
    counts: dict[str, int] = {}
    weight = 0.0
    right = 0
    for left, first in enumerate(found):
        while right < len(found) and found[right].end - first.start <= length:
            key = found[right].key
            counts[key] = counts.get(key, 0) + 1
            if counts[key] == 1:
                weight += weights.get(key, 0.0)
            right += 1
        if right > left:
            score = (round(weight, 9), right - left, -first.start)
            if best is None or score > best:
                best, span = score, (first.start, max(o.end for o in found[left:right]))
        if right > left:
            key = first.key
            counts[key] -= 1
            if counts[key] == 0:
                weight -= weights.get(key, 0.0)
        else:
            right = left + 1
    return span


def snap(text: str, start: int, end: int) -> tuple[int, int]:
    """Move the window's edges inward (at most SNAP characters) so no word is cut; never past the span."""
    if start > 0 and not text[start - 1].isspace():
        space = text.find(" ", start, start + SNAP)
        start = space + 1 if space != -1 else start
    if end < len(text) and not text[end].isspace():
        space = text.rfind(" ", max(start, end - SNAP), end)
        end = space if space > start else end
    return start, end


@dataclass(frozen=True)
class Window:
    start: int
    end: int
    #: the middle of the best-matching span (the window's start when nothing matched)
    focus: int


def window(text: str, found: list[Occurrence], weights: dict[str, float], length: int) -> Window:
    """At most `length` characters of `text`, centred on the best-matching span."""
    span = best_span(found, weights, length)
    middle = (span[0] + span[1]) // 2 if span else 0
    if len(text) <= length:
        return Window(0, len(text), middle)
    if span is None:
        return Window(*snap(text, 0, length), 0)
    raw = min(max(0, middle - length // 2), len(text) - length)
    start, end = snap(text, raw, raw + length)
    if start > span[0] or end < span[1]:  # snapping must not cut the match
        start, end = raw, raw + length
    return Window(start, end, middle)
