"""Hiding by the page's own style sheets: `<style>` rules applied to the elements they select.

A paragraph hidden by a class (`<style>.note { display: none }</style> ... <p class="note">`) reaches
the markdown like any other and no reader sees it. The page's `<style>` sheets are parsed with tinycss2
(the CSS Syntax Level 3 parser), their selectors matched with cssselect (CSS selectors as XPath over the
lxml tree), and each element gets the declarations that win the cascade for the properties that can
hide text (importance, then specificity, then order; the element's inline style beats a sheet's
non-important declaration). services/flags/hidden.py then decides from those as it does from inline
styles. Colours are left to inline styles: a sheet's dark theme (light text on a dark page) would
read as white on white without the page's backgrounds.

Linked style sheets are not fetched, `@media` blocks other than `all`/`screen` are skipped, and
selectors the engine cannot evaluate (`:hover`, pseudo-elements) are passed over. A page with more
than MAX_RULES rules that touch those properties is not evaluated: `overflowed` says so, and its
hidden-text evidence fails closed (hidden.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import tinycss2
from cssselect import HTMLTranslator, SelectorError, parse
from lxml.etree import XPath, XPathError
from lxml.html import HtmlElement

logger = logging.getLogger(__name__)

#: the properties that can hide an element's text (hidden.hidden_by_style reads these)
HIDING_PROPERTIES = frozenset(
    {
        "display", "visibility", "opacity", "font-size", "transform", "overflow", "height", "width",
        "max-height", "clip", "clip-path", "position", "left", "top", "right", "text-indent",
    }
)  # fmt: skip
MAX_RULES = 512
_TRANSLATOR = HTMLTranslator()


def declarations(text: str) -> dict[str, tuple[str, bool]]:
    """CSS declarations (a style attribute or a rule's block): name -> (value lower-cased without
    spaces, !important)."""
    out: dict[str, tuple[str, bool]] = {}
    for item in tinycss2.parse_blocks_contents(text, skip_comments=True, skip_whitespace=True):
        if item.type == "declaration":
            value = "".join(tinycss2.serialize(item.value).lower().split())
            out[item.lower_name] = (value, bool(item.important))
    return out


@dataclass
class Rule:
    """One selector of a style rule, compiled, with its place in the cascade."""

    match: XPath
    specificity: tuple[int, int, int]
    order: int
    declarations: dict[str, tuple[str, bool]]


@dataclass
class Sheet:
    """The page's rules that touch HIDING_PROPERTIES, and whether there were too many to evaluate."""

    rules: list[Rule] = field(default_factory=list)
    overflowed: bool = False


def top_rules(nodes: list[Any]) -> list[Any]:
    """Qualified rules at the top level and inside `@media all` / `@media screen` blocks."""
    out = []
    for node in nodes:
        if node.type == "qualified-rule":
            out.append(node)
        elif node.type == "at-rule" and node.lower_at_keyword == "media" and node.content is not None:
            media = tinycss2.serialize(node.prelude).strip().lower()
            if media in ("all", "screen"):
                out += top_rules(tinycss2.parse_rule_list(node.content, skip_comments=True, skip_whitespace=True))
    return out


def compiled(selector_text: str) -> list[tuple[XPath, tuple[int, int, int]]]:
    """Each selector of a rule's prelude as a compiled XPath with its specificity (none it cannot)."""
    try:
        selectors = parse(selector_text)
    except SelectorError:
        return []
    out = []
    for selector in selectors:
        if selector.pseudo_element is not None:
            continue
        try:
            out.append((XPath(_TRANSLATOR.selector_to_xpath(selector)), selector.specificity()))
        except (SelectorError, XPathError):
            continue
    return out


def page_sheet(root: HtmlElement) -> Sheet:
    """The rules of every `<style>` element of the page (media all/screen) that touch hiding properties."""
    sheet = Sheet()
    order = 0
    for style in root.iter("style"):
        media = (style.get("media") or "all").strip().lower()
        if media not in ("all", "screen", ""):
            continue
        nodes = tinycss2.parse_stylesheet(style.text or "", skip_comments=True, skip_whitespace=True)
        for rule in top_rules(nodes):
            found = {k: v for k, v in declarations(tinycss2.serialize(rule.content)).items() if k in HIDING_PROPERTIES}
            if not found:
                continue
            for match, specificity in compiled(tinycss2.serialize(rule.prelude)):
                if len(sheet.rules) >= MAX_RULES:
                    sheet.overflowed = True
                    return sheet
                sheet.rules.append(Rule(match, specificity, order, found))
                order += 1
    return sheet


def cascade(root: HtmlElement, sheet: Sheet) -> dict[HtmlElement, dict[str, tuple[str, bool]]]:
    """Each element the sheet's rules select -> its winning declaration of each hiding property."""
    winners: dict[HtmlElement, dict[str, tuple[tuple[bool, tuple[int, int, int], int], str, bool]]] = {}
    for rule in sheet.rules:
        try:
            matched = rule.match(root)
        except XPathError:
            continue
        for element in matched if isinstance(matched, list) else []:
            if not isinstance(element, HtmlElement):
                continue
            held = winners.setdefault(element, {})
            for name, (value, important) in rule.declarations.items():
                rank = (important, rule.specificity, rule.order)
                if name not in held or rank > held[name][0]:
                    held[name] = (rank, value, important)
    return {el: {k: (v[1], v[2]) for k, v in held.items()} for el, held in winners.items()}


def computed(
    sheet_declarations: dict[str, tuple[str, bool]] | None, inline: dict[str, tuple[str, bool]]
) -> dict[str, str]:
    """An element's declarations: the sheet's winners, then its inline style over the non-important ones."""
    out = {k: v for k, (v, _) in (sheet_declarations or {}).items()}
    for name, (value, important) in inline.items():
        held = (sheet_declarations or {}).get(name)
        if held is None or not held[1] or important:
            out[name] = value
    return out
