"""Markdown a renderer hides: link reference definitions that no link uses.

A link reference definition (`[label]: destination "title"`) renders as nothing; its title shows only
as a tooltip on the links that use it. One that no link uses is text no reader ever sees, which is why
`[//]: # (a note)` is markdown's comment idiom, and why an instruction for agents can hide there. Such
a definition is hidden text when its label and title hold at least COMMENT_MIN_WORDS words (a bare
`[1]: https://...` carries none).

Definitions are read by markdown-it-py (CommonMark's own rules for where a definition may stand and what
its parts are), and only when a line looks like one (an RE2 check, linear in the text). A label counts
as used when `[label]` appears anywhere else in the document (`referenced_labels`, from every chunk at
ingestion) or, without that, in the same chunk.
"""

from __future__ import annotations

from collections.abc import Iterable

import re2
from markdown_it import MarkdownIt

COMMENT_MIN_WORDS = 4
#: a line that may open a definition (up to three spaces, a bracketed label, a colon)
_DEFINITION_LINE = re2.compile(r"(?m)^ {0,3}\[[^\]\n]{1,999}\]:")
#: `[label]`, `[text][label]`, `[label][]`: every use of a label holds it in brackets
_BRACKETED = re2.compile(r"\[([^\[\]\n]{1,999})\]")
_PARSER = MarkdownIt("commonmark")


def normal_label(label: str) -> str:
    """A label as CommonMark matches it: case-folded, inner whitespace collapsed."""
    return " ".join(label.split()).casefold()


def definitions(text: str) -> dict[str, dict[str, object]]:
    """The link reference definitions of `text` (label -> title, href, line map)."""
    if _DEFINITION_LINE.search(text) is None:
        return {}
    env: dict[str, object] = {}
    _PARSER.parse(text, env)
    found = env.get("references")
    return found if isinstance(found, dict) else {}


def referenced_labels(texts: Iterable[str]) -> frozenset[str]:
    """Every bracketed text in `texts` that is not a definition's own label at the start of its line."""
    used: set[str] = set()
    for text in texts:
        for line in text.split("\n"):
            start = _DEFINITION_LINE.match(line)
            rest = line[start.end() :] if start is not None else line
            used.update(normal_label(m) for m in _BRACKETED.findall(rest))
    return frozenset(used)


class Labels:
    """The labels a document's texts use (`referenced_labels`), read once and only when first asked."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self._used: frozenset[str] | None = None

    def used(self) -> frozenset[str]:
        if self._used is None:
            self._used = referenced_labels(self.texts)
        return self._used


def has_unreferenced_definition(text: str, referenced: frozenset[str] | Labels | None = None) -> bool:
    """A definition in `text` whose label no link uses and whose label and title carry words."""
    found = definitions(text)
    if not found:
        return False
    if isinstance(referenced, Labels):
        referenced = referenced.used()
    used = referenced if referenced is not None else referenced_labels([text])
    for label, definition in found.items():
        if normal_label(label) in used:
            continue
        words = f"{label.strip('/#')} {definition.get('title') or ''}".split()
        if len(words) >= COMMENT_MIN_WORDS:
            return True
    return False
