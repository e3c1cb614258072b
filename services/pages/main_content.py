"""Find the article: the element a documentation generator puts the page's own text in.

Generators mark their content area in a fixed way, so a rule per generator is exact where a
readability heuristic guesses (measured on real Debian docs: see bench/RESULTS.md and
bench/extraction.py). Pages no rule fits (plain articles, blogs) keep <body>, pruned of the blocks
resiliparse's main-content heuristic leaves out: its judgement of what is boilerplate, our converter
for the text (resiliparse's own output loses code languages, inline code and tables).

Pages are outside content, so this step keeps to the "html" budget (services/core/budgets.py): resiliparse
parses the raw page without lxml's nesting cap and slows with depth times size (100,000 nested
<div>s: minutes), so a page nested past the budget's depth keeps its whole body instead; and matching
blocks against resiliparse's text searches onward from the last match, within a bounded number of
passes over that text, instead of from the start for every block (quadratic on large pages).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

import lxml.html
from lxml.html import HtmlElement

from services.core.budgets import budget
from services.pages.base import PageContext, Step
from services.pages.parse import classes

logger = logging.getLogger(__name__)

DOCBOOK_CLASSES = frozenset(
    {
        "book", "part", "chapter", "sect1", "section", "refentry", "preface", "appendix", "article",
        "reference", "glossary", "index", "bibliography", "set", "colophon", "legalnotice", "dedication",
    }
)  # fmt: skip


def _has_ancestor(element: HtmlElement, test: Callable[[HtmlElement], bool]) -> bool:
    parent = element.getparent()
    while parent is not None:
        if test(parent):
            return True
        parent = parent.getparent()
    return False


def _is_sphinx_body(e: HtmlElement) -> bool:
    return e.tag == "div" and "body" in classes(e) and _has_ancestor(e, lambda p: "document" in classes(p))


def _is_docusaurus(e: HtmlElement) -> bool:
    found = classes(e)
    return e.tag == "div" and (
        "theme-doc-markdown" in found or ("markdown" in found and _has_ancestor(e, lambda p: p.tag == "article"))
    )


def _is_docbook(e: HtmlElement) -> bool:
    parent = e.getparent()
    return e.tag == "div" and parent is not None and parent.tag == "body" and bool(DOCBOOK_CLASSES & classes(e))


def _is_mdbook(e: HtmlElement) -> bool:
    parent = e.getparent()
    return e.tag == "main" and parent is not None and parent.get("id") == "content"


#: (name, rule), most specific first. The first rule matching an element with enough text wins.
GENERATOR_RULES: tuple[tuple[str, Callable[[HtmlElement], bool]], ...] = (
    ("mkdocs-material", lambda e: e.tag == "article" and "md-content__inner" in classes(e)),
    ("docusaurus", _is_docusaurus),
    ("sphinx", lambda e: e.tag == "div" and e.get("role") == "main"),  # also MkDocs' own themes
    ("sphinx-django", lambda e: e.get("id") == "yui-main"),
    ("sphinx", _is_sphinx_body),
    ("rustdoc", lambda e: e.tag == "section" and e.get("id") == "main-content"),
    ("mdbook", _is_mdbook),
    ("docbook", _is_docbook),
    ("main", lambda e: e.tag == "main"),
    ("role-main", lambda e: e.get("role") == "main"),
    ("article", lambda e: e.tag == "article"),
)

#: A block of a page no rule fits is kept when at least this share of its words are main-content words.
KEEP_SHARE = 0.5
_WORD = re.compile(r"\w+")
HEADING_TAGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
TEXT_BLOCK_TAGS = frozenset({"p", "ul", "ol", "dl", "table", "blockquote"})
MAX_LINK_SHARE = 0.5

#: A match with less text than this (and under a quarter of the body's) is not the article.
MIN_MAIN_CHARS = 200


def text_length(element: HtmlElement) -> int:
    return len(" ".join(element.text_content().split()))


def select_main(tree: HtmlElement) -> tuple[HtmlElement | None, str]:
    """The generator's content element and its rule's name, or (None, "")."""
    matches: dict[int, list[HtmlElement]] = {}
    for element in tree.iter():
        if not isinstance(element.tag, str):
            continue
        for index, (_, rule) in enumerate(GENERATOR_RULES):
            if rule(element):
                matches.setdefault(index, []).append(element)
    if not matches:
        return None, ""
    body = tree.find("body")
    body_chars = text_length(body if body is not None else tree)
    for index in sorted(matches):
        name, found = GENERATOR_RULES[index][0], matches[index]
        if name == "docbook" and len(found) > 1:
            return wrap(found), name
        best = max(found, key=text_length)
        chars = text_length(best)
        if chars >= MIN_MAIN_CHARS or chars * 4 >= body_chars:
            return best, name
    return None, ""


def wrap(elements: list[HtmlElement]) -> HtmlElement:
    """One <div> holding (copies of) several sibling content elements, in document order."""
    holder = lxml.html.Element("div")
    for element in elements:
        holder.append(lxml.html.fromstring(lxml.html.tostring(element)))
    return holder


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def main_text_reference(html: str) -> str | None:
    """resiliparse's main-content text of the page (whitespace collapsed), or None if unavailable."""
    try:
        from resiliparse.extract.html2text import extract_plain_text

        text = extract_plain_text(html, main_content=True, alt_texts=False, list_bullets=False)
    except Exception as exc:  # resiliparse missing or failing on odd input: keep the whole body
        logger.debug("resiliparse gave no main content: %s", exc)
        return None
    return " ".join(text.split()) or None


#: "Is there an element this deep under <html>?" (one XPath step per level, in C: a normal page's
#: node set is empty after a few dozen steps).
_TOO_DEEP = "boolean(" + "/".join(["*"] * budget("html").depth) + ")"


def too_deep(tree: HtmlElement) -> bool:
    """Whether the page nests elements deeper than the "html" budget's depth."""
    return bool(tree.xpath(_TOO_DEEP))


class Reference:
    """resiliparse's text, searched for each block's text in document order: onward from where the
    last block was found, then (blocks out of order) before it, all within `passes` lengths of the
    text; past that, a block counts as not found (its words decide, see `prune_to_reference`)."""

    def __init__(self, text: str, passes: int) -> None:
        self.text = text
        self.cursor = 0
        self.work = passes * max(len(text), 1)

    def __contains__(self, fragment: str) -> bool:
        if self.work <= 0:
            return False
        found = self.text.find(fragment, self.cursor)
        self.work -= (found if found >= 0 else len(self.text)) - self.cursor + len(fragment)
        if found < 0 and self.cursor:
            found = self.text.find(fragment, 0, self.cursor + len(fragment) - 1)
            self.work -= self.cursor
        if found < 0:
            return False
        self.cursor = found
        return True


def prune_to_reference(element: HtmlElement, reference: Reference, vocabulary: set[str]) -> None:
    """Drop child blocks whose text is (mostly) absent from `reference`; recurse into mixed ones."""
    for child in list(element):
        if not isinstance(child.tag, str):
            continue
        text = " ".join(child.text_content().split())
        if not text:
            continue
        if child.tag not in HEADING_TAGS and link_share(child, text) >= MAX_LINK_SHARE:
            child.drop_tree()  # menus, blogrolls, footers: mostly links
            continue
        if is_article_block(child, text) or text in reference:
            continue
        tokens = words(text)
        known = sum(1 for token in tokens if token in vocabulary)
        if tokens and known < KEEP_SHARE * len(tokens):
            child.drop_tree()
        else:
            prune_to_reference(child, reference, vocabulary)


def is_article_block(element: HtmlElement, text: str) -> bool:
    """Headings, code, paragraphs, lists and tables that are not mostly links stay (heuristics such as
    resiliparse's drop short plain lists, which chrome rarely is)."""
    if element.tag in HEADING_TAGS or element.tag == "pre":
        return True
    return element.tag in TEXT_BLOCK_TAGS


def link_share(element: HtmlElement, text: str) -> float:
    """Share of the element's text that is link text."""
    link_chars = sum(len(" ".join(a.text_content().split())) for a in element.iter("a"))
    return link_chars / max(1, len(text))


def guided_body(tree: HtmlElement, html: str) -> tuple[HtmlElement, str]:
    """<body> without the blocks resiliparse judges boilerplate (all of it if resiliparse finds nothing)."""
    body = tree.find("body")
    root = body if body is not None else tree
    reference = None if too_deep(tree) else main_text_reference(html)
    if reference is None:
        return root, "body"
    prune_to_reference(root, Reference(reference, budget("html").structure), set(words(reference)))
    return root, "body+resiliparse"


class SelectMainContent(Step):
    """Set `page.main`: a generator's content element, else <body> pruned to resiliparse's main content."""

    def run(self, page: PageContext) -> None:
        if page.tree is None:
            return
        main, via = select_main(page.tree)
        if main is None:
            main, via = guided_body(page.tree, page.source)
        page.main, page.main_via = main, via
