"""Record the text a person would not see before the article is cleaned (services/flags/hidden.py).

Runs between SelectMainContent and Sanitize: it walks the article element once, counts the hidden
blocks Sanitize is about to remove (comments, `hidden` and `aria-hidden` elements with text: they never
reach an agent), and turns the text of elements hidden only by CSS, inline or by the page's own
`<style>` sheets (services/flags/stylesheet.py; Sanitize keeps them, so they reach the markdown), into
marks in `page.metadata`. Chrome is skipped: Sanitize drops it.
"""

from __future__ import annotations

from lxml.html import HtmlElement

from services.flags.hidden import (
    MARKS_KEY,
    MIN_WORDS,
    OVERFLOW_KEY,
    REMOVED_KEY,
    hidden_element,
    marks_of,
    style_of,
)
from services.flags.stylesheet import cascade, page_sheet
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
        root = page.tree if page.tree is not None else page.main.getroottree().getroot()
        sheet = page_sheet(root)
        styled = cascade(page.main.getroottree().getroot(), sheet) if sheet.rules else {}
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
            if hidden_element(element, background, styled.get(element)):
                kept.append(element.text_content())
                continue
            style = style_of(element, styled.get(element))
            ground = style.get("background-color") or style.get("background") or background
            stack.extend((child, ground) for child in reversed(element))
        marks = marks_of(kept)
        if marks is None or sheet.overflowed:  # too much to keep (or to evaluate): every chunk is flagged
            page.metadata[OVERFLOW_KEY] = True
        elif marks:
            page.metadata[MARKS_KEY] = marks
        if removed:
            page.metadata[REMOVED_KEY] = removed
