"""Drop what is not the article's text from the chosen content element.

Removed: non-text elements (scripts, styles, media, forms, buttons), site chrome (navigation,
sidebars, in-page tables of contents, breadcrumbs, headers/footers outside the article, previous/next
links, "edit this page", skip links, search boxes, cookie banners, copy buttons) and permalink
anchors such as Sphinx's "¶". The markers are the ones the common generators really emit; one pass
over the tree tests each element against them.
"""

from __future__ import annotations

from lxml.html import HtmlElement

from services.pages.base import PageContext, Step
from services.pages.parse import classes

#: Elements that never carry article text.
NON_TEXT_TAGS = frozenset(
    {
        "script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "embed", "link", "meta",
        "head", "form", "button", "input", "select", "textarea", "dialog", "nav", "img", "picture", "video",
        "audio", "map",
    }
)  # fmt: skip

#: Classes of chrome: tables of contents and sidebars, breadcrumbs, previous/next and page footers,
#: edit links, skip links, search, copy buttons.
CHROME_CLASSES = frozenset(
    {
        "toc", "sphinxsidebar", "md-sidebar", "theme-doc-toc-mobile", "table-of-contents", "sidebar",
        "breadcrumb", "breadcrumbs", "theme-doc-breadcrumbs",
        "related", "navheader", "navfooter", "nav-wrapper", "nav-chapters", "pagination-nav", "prev-next",
        "md-footer", "md-source-file", "md-content__button", "edit-this-page", "theme-edit-this-page",
        "theme-doc-footer", "theme-last-updated", "headerbtn",
        "skip-link", "skip-to-content", "searchbox", "search",
        "copybtn", "copy-button", "md-clipboard", "clipboard", "cc-window",
    }
)  # fmt: skip
#: Permalink anchors next to headings (Sphinx, MkDocs, Docusaurus, rustdoc): on <a> only.
PERMALINK_CLASSES = frozenset({"headerlink", "hash-link", "anchor", "doc-anchor"})
CHROME_IDS = frozenset({"toc", "skip-to-content", "searchbox", "onetrust-consent-sdk", "sidebar", "breadcrumbs"})
CHROME_ROLES = frozenset({"navigation", "search", "banner", "contentinfo", "dialog"})
CHROME_PREFIXES = ("cookie", "consent")  # cookie banners, by id or class prefix
BREADCRUMB_LABELS = frozenset({"breadcrumb", "breadcrumbs"})
ADMONITION_CLASSES = frozenset({"admonition", "theme-admonition"})

#: Outside an element a generator marks as the article, page headers and footers are chrome too.
PAGE_FRAME_TAGS = frozenset({"header", "footer"})


def is_chrome(element: HtmlElement, page_frame: bool) -> bool:
    """Whether `element` (and all it holds) is not article text."""
    tag = element.tag
    if tag in NON_TEXT_TAGS or tag == "footer" or (page_frame and tag in PAGE_FRAME_TAGS):
        return True
    found = classes(element)
    if tag == "aside" and not found & ADMONITION_CLASSES:
        return True
    if tag == "a" and found & PERMALINK_CLASSES:
        return True
    if found & CHROME_CLASSES or (found and "contents" in found and found & {"local", "topic"}):
        return True
    ident = element.get("id") or ""
    if ident in CHROME_IDS or ident.lower().startswith(CHROME_PREFIXES):
        return True
    if any(c.lower().startswith(CHROME_PREFIXES) for c in found):
        return True
    if element.get("role") in CHROME_ROLES or (element.get("aria-label") or "").lower() in BREADCRUMB_LABELS:
        return True
    return element.get("hidden") is not None or element.get("aria-hidden") == "true"


def remove_chrome(root: HtmlElement, page_frame: bool) -> None:
    """Remove non-text elements and chrome under `root` (and <header>/<footer> if `page_frame`)."""
    doomed: list[HtmlElement] = []
    skip_under: HtmlElement | None = None
    for element in root.iterdescendants():
        if not isinstance(element.tag, str):
            doomed.append(element)  # comments, processing instructions
            continue
        if skip_under is not None and _inside(element, skip_under):
            continue
        if is_chrome(element, page_frame):
            doomed.append(element)
            skip_under = element
    for element in doomed:
        if element.getparent() is not None:
            element.drop_tree()


def _inside(element: HtmlElement, ancestor: HtmlElement) -> bool:
    parent = element.getparent()
    while parent is not None:
        if parent is ancestor:
            return True
        parent = parent.getparent()
    return False


class Sanitize(Step):
    """Strip `page.main` down to the article."""

    def run(self, page: PageContext) -> None:
        if page.main is None:
            return
        remove_chrome(page.main, page_frame=page.main_via.startswith("body"))
