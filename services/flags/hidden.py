"""Text a person would not see in an HTML page, and how its trace is tied to the chunks it reaches.

The page pipeline (services/pages/) removes comments, `hidden` and `aria-hidden` elements before the
article becomes markdown, so those never reach an agent; it keeps elements hidden only by CSS, inline
(`style="display:none"`, zero size, off-screen, white on white, ...) or by a rule of the page's own
`<style>` sheets (stylesheet.py). Those are what an agent reads and a person does not. Their text is
recorded before markdown is made, as *marks*: short hashes of its word n-grams (no text is stored),
kept in the document's metadata (`hidden_marks`). At ingestion a chunk holding one of those n-grams is
flagged `hidden_text`, wherever chunking put the boundaries.

Every n-gram of every hidden block is kept, so no amount of hidden filler thins out the marks of a
short note elsewhere on the page (they used to be thinned to 96 for the whole page). A page with more
than MAX_MARKS distinct hidden n-grams, or a sheet too large to evaluate, keeps no marks but
`hidden_overflow`: every chunk of the document is then flagged (fails closed). The count of removed
hidden blocks is kept too (`hidden_removed`), as a document-level signal.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from lxml.html import HtmlElement

from services.flags.stylesheet import computed, declarations

MARKS_KEY = "hidden_marks"
REMOVED_KEY = "hidden_removed"
OVERFLOW_KEY = "hidden_overflow"
#: word n-grams a mark covers; hidden texts shorter than this use their whole length (down to MIN_WORDS)
SHINGLE = 5
MIN_WORDS = 3
#: distinct hidden n-grams a page keeps (~60 KB of metadata); past it, the page's evidence overflows
MAX_MARKS = 4096
_WORD = re.compile(r"\w+")

WHITE = frozenset({"#fff", "#ffffff", "white", "rgb(255,255,255)", "rgba(255,255,255,1)", "#fffffe", "snow"})
TRANSPARENT = frozenset({"transparent", "rgba(0,0,0,0)", "rgba(255,255,255,0)"})


def evidence(metadata: dict[str, Any]) -> dict[str, Any]:
    """The hidden-text evidence among a page's pipeline metadata: what every path that stores a page
    (crawl, single URL, HTML file) keeps in the document's metadata."""
    return {k: metadata[k] for k in (MARKS_KEY, REMOVED_KEY, OVERFLOW_KEY) if k in metadata}


def style_of(element: HtmlElement, sheet: dict[str, tuple[str, bool]] | None = None) -> dict[str, str]:
    """An element's CSS declarations, lower-cased and without spaces in values: its inline style over
    what the page's style sheets give it (`sheet`: stylesheet.cascade)."""
    return computed(sheet, declarations(element.get("style") or ""))


def length(value: str | None) -> float | None:
    """A CSS length's number in px-ish units (em/rem x16, % as is), None if not a plain length."""
    if not value:
        return None
    for unit, factor in (("px", 1.0), ("rem", 16.0), ("em", 16.0), ("pt", 1.33), ("%", 1.0), ("", 1.0)):
        if value.endswith(unit):
            try:
                return float(value[: len(value) - len(unit)] or "x") * factor
            except ValueError:
                return None
    return None


def tiny(value: str | None, limit: float = 1.0) -> bool:
    size = length(value)
    return size is not None and size <= limit


def far_off(value: str | None) -> bool:
    size = length(value)
    return size is not None and size <= -500


def hidden_by_style(style: dict[str, str], background: str | None) -> bool:
    """Whether these declarations hide the element's text from a reader (`background`: the nearest
    inline background colour above it)."""
    if style.get("display") == "none" or style.get("visibility") in ("hidden", "collapse"):
        return True
    if tiny(style.get("opacity"), 0.05) or tiny(style.get("font-size"), 1.0):
        return True
    if style.get("transform", "").startswith(("scale(0)", "scale(0,", "scalex(0)", "scaley(0)")):
        return True
    clipped = style.get("overflow") in ("hidden", "clip")
    if clipped and (
        tiny(style.get("height"), 1.0) or tiny(style.get("width"), 1.0) or tiny(style.get("max-height"), 1.0)
    ):
        return True
    if style.get("clip", "").replace(" ", "").startswith("rect(0") or style.get("clip-path", "") in (
        "inset(50%)",
        "circle(0)",
    ):
        return True
    if style.get("position") in ("absolute", "fixed") and any(far_off(style.get(k)) for k in ("left", "top", "right")):
        return True
    if far_off(style.get("text-indent")):
        return True
    color = style.get("color")
    if color in TRANSPARENT:
        return True
    own = style.get("background-color") or style.get("background")
    ground = own or background
    return color is not None and (color == ground or (color in WHITE and (ground is None or ground in WHITE)))


def hidden_element(
    element: HtmlElement, background: str | None, sheet: dict[str, tuple[str, bool]] | None = None
) -> bool:
    if element.tag == "font" and (element.get("color") or "").strip().lower() in WHITE:
        return background is None or background in WHITE
    return hidden_by_style(style_of(element, sheet), background)


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def mark(gram: list[str]) -> str:
    """One n-gram's mark: its length, then 12 hex digits of its hash."""
    digest = hashlib.blake2b(" ".join(gram).encode(), digest_size=6).hexdigest()
    return f"{len(gram)}{digest}"


def marks_of(texts: Iterable[str], limit: int = MAX_MARKS) -> list[str] | None:
    """Marks for hidden texts, block by block: every n-gram of each (n = SHINGLE, or the text's length
    if shorter). None when there are more than `limit` distinct ones (the evidence overflows)."""
    found: dict[str, None] = {}
    for text in texts:
        tokens = words(text)
        if len(tokens) < MIN_WORDS:
            continue
        size = min(SHINGLE, len(tokens))
        for i in range(len(tokens) - size + 1):
            found[mark(tokens[i : i + size])] = None
            if len(found) > limit:
                return None
    return list(found)


def mark_hits(text: str, marks: Iterable[str]) -> bool:
    """Whether `text` holds one of the n-grams `marks` were made from."""
    wanted = set(marks)
    if not wanted:
        return False
    tokens = words(text)
    for size in sorted({int(m[0]) for m in wanted if m[:1].isdigit()}):
        for i in range(len(tokens) - size + 1):
            if mark(tokens[i : i + size]) in wanted:
                return True
    return False
