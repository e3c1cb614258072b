"""Find the article: the element a documentation generator puts the page's own text in.

Generators mark their content area in a fixed way, so a rule per generator is exact where a
readability heuristic guesses (measured on real Debian docs: see bench/RESULTS.md). Pages no rule
fits (plain articles, blogs) fall back to readability-lxml's scoring, then to <body>.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import lxml.html
from lxml.html import HtmlElement

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


def readability_main(html: str) -> HtmlElement | None:
    """readability-lxml's pick of the article, as an element (None if it finds nothing)."""
    try:
        from readability import Document

        summary = Document(html).summary(html_partial=True)
        element = lxml.html.fragment_fromstring(summary, create_parent="div")
    except Exception as exc:  # readability raises on empty or odd documents
        logger.debug("readability found no article: %s", exc)
        return None
    return element if text_length(element) else None


class SelectMainContent(Step):
    """Set `page.main`: a generator's content element, else readability's article, else <body>."""

    def run(self, page: PageContext) -> None:
        if page.tree is None:
            return
        main, via = select_main(page.tree)
        if main is None:
            main, via = readability_main(page.source), "readability"
        if main is None:
            body = page.tree.find("body")
            main, via = (body if body is not None else page.tree), "body"
        page.main, page.main_via = main, via
