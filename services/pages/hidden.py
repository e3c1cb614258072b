"""Record the text a person would not see before the article is cleaned (services/flags/hidden.py).

Runs between SelectMainContent and Sanitize: it walks the article element once, counts the hidden
blocks Sanitize is about to remove (comments, `hidden` and `aria-hidden` elements with text: they never
reach an agent), and turns the text of elements hidden only by inline CSS (which Sanitize keeps, and
which therefore reaches the markdown) into marks in `page.metadata`. Chrome is skipped: Sanitize drops it.
"""

from __future__ import annotations

from lxml.html import HtmlElement

from services.flags.hidden import MARKS_KEY, MIN_WORDS, REMOVED_KEY, hidden_element, marks_of, style_of
from services.pages.base import PageContext, Step
from services.pages.sanitize import is_chrome


def removed_by_sanitize(element: HtmlElement) -> bool:
    return element.get("hidden") is not None or element.get("aria-hidden") == "true"


def wordy(text: str) -> bool:
    return len(text.split()) >= MIN_WORDS


class FindHiddenText(Step):
    """Fill `hidden_marks` (inline-hidden text that survives into the markdown) and `hidden_removed`
    (hidden blocks with text that Sanitize removes) in `page.metadata`, when there are any."""

    def run(self, page: PageContext) -> None:
        if page.main is None:
            return
        frame = page.main_via.startswith("body")
        kept: list[str] = []
        removed = 0
        stack: list[tuple[HtmlElement, str | None]] = [(child, None) for child in reversed(page.main)]
        while stack:
            element, background = stack.pop()
            if not isinstance(element.tag, str):
                removed += wordy(element.text or "")  # a comment
                continue
            if removed_by_sanitize(element):
                removed += wordy(element.text_content())
                continue
            if is_chrome(element, frame):
                continue
            if hidden_element(element, background):
                kept.append(element.text_content())
                continue
            style = style_of(element)
            ground = style.get("background-color") or style.get("background") or background
            stack.extend((child, ground) for child in reversed(element))
        marks = marks_of(kept)
        if marks:
            page.metadata[MARKS_KEY] = marks
        if removed:
            page.metadata[REMOVED_KEY] = removed
