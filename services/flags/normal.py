"""Text as a reader sees it: the view the text rules also scan, and the disguises that only show in it.

An injection can be written so that a person (and the model) reads "ignore all previous instructions"
while the stored characters are something else: a zero-width character or a soft hyphen inside a word,
a Cyrillic "о" for a Latin "o", fullwidth letters. The rules (rules.py) are written over plain text, so
they also scan a normalised view, built the way Unicode TS #39 builds a skeleton:

1. NFKC (fullwidth and other compatibility forms become the letters they show), then case folding;
2. every Default_Ignorable_Code_Point removed (zero-width characters, soft hyphens, joiners, variation
   selectors, tag characters, bidi controls): they render as nothing (the `regex` library's Unicode
   property, kept current with the UCD);
3. confusables mapped to their prototype (confusables.txt of TS #39, through the `disarm` library,
   folded toward Latin: the rules are Latin). Only non-ASCII characters are mapped: ASCII is already
   what the rules read, and TS #39 maps some ASCII to other ASCII (`|` to `l`), which would break them.

Two disguises are flags of their own, read from the stored text itself:

- an invisible character inside a word (between two letters of a word without digits or underscores:
  the PostgreSQL manual's zero-width spaces after `_`, between digit groups and inside ISO 8601 codes
  such as `P-1Y-2M3D<ZWSP>T` are line-break hints, not inside a word), `invisible_chars`;
- a mixed-script word: Latin letters beside letters of another script that look like Latin ones
  (`раypal`), `mixed_script`. A word whose other-script letters have no Latin look-alike (`kΩ`) or that
  has a single Latin letter (`μs`) is not one.

Plain ASCII text (most documentation) is its own view: nothing here runs for it.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import disarm
import regex

#: runs of default-ignorable code points (derived property of the UCD, in the `regex` library)
IGNORABLE = regex.compile(r"\p{Default_Ignorable_Code_Point}+")
#: a run of non-ASCII characters (the only ones the confusable fold touches)
NON_ASCII = regex.compile(r"[^\x00-\x7f]+")
#: a word with letters of any script
WORD = regex.compile(r"[\p{L}\p{M}]+")
#: a token of word characters (letters, digits, underscores) after a position, and before one
TOKEN = regex.compile(r"\w*")
TOKEN_BACKWARDS = regex.compile(r"(?r)\w*")
#: the same, matched backwards from a position (where the word holding it starts)
WORD_BACKWARDS = regex.compile(r"(?r)[\p{L}\p{M}]+")
#: an ASCII letter beside a letter beyond ASCII (marks between): where a word mixes scripts
MIXED_EDGE = regex.compile(r"[A-Za-z]\p{M}*[^\x00-\x7f\P{L}]|[^\x00-\x7f\P{L}]\p{M}*[A-Za-z]")
#: joiners that scripts other than Latin need inside words (Persian, Indic scripts, emoji sequences)
SCRIPT_JOINERS = frozenset("\u200c\u200d")


@lru_cache(maxsize=8192)
def fold_short_run(run: str) -> str:
    """A short non-ASCII run mapped (cached: quotes, dashes and words repeat)."""
    return str(disarm.normalize_confusables(run))


def fold_run(match: regex.Match[str]) -> str:
    run = match.group(0)
    return fold_short_run(run) if len(run) <= 32 else str(disarm.normalize_confusables(run))


def fold_confusables(text: str) -> str:
    """Each non-ASCII run mapped to its Latin prototype (TS #39 confusables; disarm)."""
    return NON_ASCII.sub(fold_run, text)


def reader_view(text: str) -> str:
    """The normalised view (module docstring); `text` itself when it is ASCII."""
    if text.isascii():
        return text
    view = unicodedata.normalize("NFKC", text).casefold()
    view = IGNORABLE.sub("", view)
    return fold_confusables(view) if not view.isascii() else view


def invisible_inside_word(text: str) -> bool:
    """A run of default-ignorable characters between two letters of a word (module docstring); a
    zero-width joiner or non-joiner beside a non-Latin letter is how its script is written, and does not
    count. One pass over the runs (a character class: linear), not over every character."""
    if text.isascii():
        return False
    for match in IGNORABLE.finditer(text):
        start, end = match.span()
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not (before.isalpha() and after.isalpha()):
            continue
        if set(match.group(0)) <= SCRIPT_JOINERS and not (before.isascii() and after.isascii()):
            continue
        if in_identifier(text, start, end):
            continue
        return True
    return False


def in_identifier(text: str, start: int, end: int) -> bool:
    """Whether the run at [start, end) sits inside a token with digits or underscores (`P-1Y-2M3D<ZWSP>T`,
    `ddl_<ZWSP>command`): a line-break hint in an identifier or a code, not a word a reader reads."""
    before = TOKEN_BACKWARDS.search(text, 0, start)
    after = TOKEN.match(text, end)
    token = (before.group(0) if before else "") + (after.group(0) if after else "")
    return any(c.isdigit() or c == "_" for c in token)


@lru_cache(maxsize=4096)
def latin_look_alike(char: str) -> bool:
    """A letter of another script than Latin that looks like a Latin letter (its prototype is ASCII)."""
    if char.isascii() or not char.isalpha():
        return False
    scripts = disarm.detect_scripts(char)
    if not scripts or disarm.Script.LATIN in scripts:
        return False
    folded = disarm.normalize_confusables(char)
    return folded != char and folded.isascii() and folded.isalpha()


def word_around(text: str, at: int) -> tuple[int, int]:
    """The bounds of the word (letters and marks) holding the letter at `at` (both ends found in C)."""
    after = WORD.match(text, at)
    before = WORD_BACKWARDS.search(text, 0, at + 1)
    return (before.start() if before else at), (after.end() if after else at + 1)


def mixed_script_word(text: str) -> bool:
    """A word with two or more ASCII letters and a letter of another script that looks Latin. Only the
    words around non-ASCII letters are looked at, each once."""
    if text.isascii():
        return False
    look_alikes = {c for c in set(text) if latin_look_alike(c)}  # distinct characters: few
    if not look_alikes:  # the common case (accented Latin, CJK, quotes): done at C speed
        return False
    covered = 0
    for match in MIXED_EDGE.finditer(text):  # only where an ASCII letter touches a letter beyond ASCII
        foreign = next(c for c in match.group(0) if not c.isascii() and c.isalpha())
        if match.start() < covered or foreign not in look_alikes:
            continue
        start, covered = word_around(text, match.start())
        word = text[start:covered]
        if sum(c.isascii() for c in word) >= 2:
            return True
    return False
