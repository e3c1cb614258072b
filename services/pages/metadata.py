"""Page metadata: title, description, language, canonical URL and the generator that built the page."""

from __future__ import annotations

import re

from lxml.html import HtmlElement

from services.pages.base import PageContext, Step

_WHITESPACE = re.compile(r"\s+")


def clean_text(text: str | None) -> str | None:
    """Collapse whitespace; None when nothing is left."""
    collapsed = _WHITESPACE.sub(" ", text or "").strip()
    return collapsed or None


def first(tree: HtmlElement, xpath: str) -> str | None:
    found = tree.xpath(xpath)
    if not found:
        return None
    value = found[0]
    return clean_text(value.text_content() if isinstance(value, HtmlElement) else str(value))


class ExtractMetadata(Step):
    """Fill `page.title` (<title>, else og:title, else the first <h1>) and `page.metadata`."""

    def run(self, page: PageContext) -> None:
        tree = page.tree
        if tree is None:
            return
        page.title = (
            first(tree, "//title") or first(tree, "//meta[@property='og:title']/@content") or first(tree, "//h1")
        )
        found = {
            "description": first(tree, "//meta[@name='description']/@content")
            or first(tree, "//meta[@property='og:description']/@content"),
            "generator": first(tree, "//meta[@name='generator']/@content"),
            "language": clean_text(tree.get("lang")),
            "canonical": first(tree, "//link[@rel='canonical']/@href"),
        }
        page.metadata.update({k: v[:300] for k, v in found.items() if v})
