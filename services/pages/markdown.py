"""The article element to markdown: ATX headings, fenced code with its language, tables, lists,
definition lists, admonitions as quoted blocks; links keep their text only (targets are outlinks).

A small converter over the lxml tree (a third-party converter over BeautifulSoup took ~0.3 s on a
large documentation page; this takes a few tens of milliseconds).
"""

from __future__ import annotations

import re

from lxml.html import HtmlElement

from services.pages.base import PageContext, Step
from services.pages.parse import classes

BLOCK_TAGS = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "center", "dd", "details", "dialog", "div", "dl",
        "dt", "fieldset", "figcaption", "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup",
        "hr", "li", "main", "ol", "p", "pre", "section", "summary", "table", "ul", "caption", "html",
    }
)  # fmt: skip
HEADINGS = {f"h{n}": n for n in range(1, 7)}
CODE_TAGS = frozenset({"code", "kbd", "samp", "tt", "var"})
ADMONITION_CLASSES = frozenset(
    {"admonition", "theme-admonition", "markdown-alert", "note", "tip", "warning", "caution", "important", "danger"}
)
ADMONITION_TITLE_CLASSES = frozenset({"admonition-title", "title", "markdown-alert-title"})
_LANGUAGE_CLASS = re.compile(r"^(?:language|lang|highlight)-(.+)$")
_GENERIC_LANGUAGES = frozenset({"default", "none", "text", "plaintext", "nohighlight", "notranslate", "source"})
_SPACES = re.compile(r"[ \t\r\n\f\v\u00a0]+")
_BREAK = "\x00"  # a <br> inside inline text, turned into a newline after whitespace is collapsed


def code_language(pre: HtmlElement) -> str:
    """A code block's language from `language-x` / `lang-x` / `highlight-x` classes on its <code>,
    itself, or the wrappers generators put around it (Sphinx, MkDocs Material, Docusaurus)."""
    candidates = [*pre.iterchildren("code"), pre]
    parent = pre.getparent()
    for _ in range(3):
        if parent is None:
            break
        candidates.append(parent)
        parent = parent.getparent()
    for element in candidates:
        for css_class in (element.get("class") or "").split():
            match = _LANGUAGE_CLASS.match(css_class)
            if match and match.group(1).lower() not in _GENERIC_LANGUAGES:
                return match.group(1).lower()
    return ""


def collapse(text: str) -> str:
    """Inline text: whitespace runs become one space; <br> markers become newlines."""
    lines = (_SPACES.sub(" ", part).strip() for part in text.split(_BREAK))
    return "\n".join(line for line in lines if line)


def inline(element: HtmlElement) -> str:
    """The inline markdown of an element (its text, code spans, emphasis; links as their text)."""
    tag = element.tag if isinstance(element.tag, str) else ""
    if tag == "br":
        return _BREAK
    if tag in CODE_TAGS:
        text = _SPACES.sub(" ", element.text_content()).strip()
        if not text:
            return ""
        fence = "``" if "`" in text else "`"
        return f"{fence}{text}{fence}"
    inner = (element.text or "") if tag else ""
    for child in element:
        inner += inline(child) + (child.tail or "")
    if tag in {"strong", "b"} and inner.strip():
        return f" **{inner.strip()}** "
    if tag in {"em", "i"} and inner.strip():
        return f" *{inner.strip()}* "
    if tag in BLOCK_TAGS:
        return f" {inner} "
    return inner


def blocks(element: HtmlElement) -> list[str]:
    """The markdown blocks of an element's content, in order."""
    out: list[str] = []
    pending: list[str] = [element.text or ""]

    def flush() -> None:
        text = collapse("".join(pending))
        pending.clear()
        if text:
            out.append(text)

    for child in element:
        tag = child.tag if isinstance(child.tag, str) else ""
        if tag in BLOCK_TAGS:
            flush()
            out.extend(block(child))
        elif tag:
            pending.append(inline(child))
        pending.append(child.tail or "")
    flush()
    return out


def block(element: HtmlElement) -> list[str]:
    """The markdown blocks of one block-level element."""
    tag = element.tag
    if tag in HEADINGS:
        text = collapse(inline(element)).replace("\n", " ")
        return [f"{'#' * HEADINGS[tag]} {text}"] if text else []
    if tag == "pre":
        return [fenced(element)]
    if tag in {"ul", "ol"}:
        return list_items(element, ordered=tag == "ol")
    if tag == "table":
        return table(element)
    if tag == "dl":
        return definitions(element)
    if tag == "hr":
        return []
    if tag == "blockquote" or (tag in {"div", "aside", "section", "details"} and ADMONITION_CLASSES & classes(element)):
        return [quote(admonition(element))]
    return blocks(element)


def fenced(pre: HtmlElement) -> str:
    text = pre.text_content().strip("\n")
    fence = "````" if "```" in text else "```"
    return f"{fence}{code_language(pre)}\n{text}\n{fence}"


def list_items(element: HtmlElement, ordered: bool) -> list[str]:
    items: list[str] = []
    for number, item in enumerate(element.iterchildren("li"), start=1):
        marker = f"{number}. " if ordered else "- "
        body = "\n\n".join(blocks(item)).split("\n")
        if body == [""]:
            continue
        pad = " " * len(marker)
        lines = [marker + body[0], *[(pad + line) if line else "" for line in body[1:]]]
        items.append("\n".join(lines))
    return ["\n".join(items)] if items else []


def table(element: HtmlElement) -> list[str]:
    rows: list[list[str]] = []
    for row in element.xpath("./tr|./thead/tr|./tbody/tr|./tfoot/tr"):
        cells = [
            collapse(" ".join(blocks(cell))).replace("\n", " ").replace("|", "\\|")
            for cell in row.iterchildren("td", "th")
        ]
        if any(cells):
            rows.append(cells)
    if not rows:
        return []
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * width]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    caption = element.find("caption")
    head = [collapse(inline(caption))] if caption is not None else []
    return [*head, "\n".join(lines)]


def definitions(element: HtmlElement) -> list[str]:
    out: list[str] = []
    for child in element.iterchildren("dt", "dd"):
        if child.tag == "dt":
            term = collapse(inline(child)).replace("\n", " ")
            if term:
                out.append(f"**{term}**" if "**" not in term and "`" not in term else term)
        else:
            out.extend(blocks(child))
    return out


def admonition(element: HtmlElement) -> list[str]:
    """An admonition's blocks, its title (or kind) first as "**Note:**"."""
    if not ADMONITION_CLASSES & classes(element):
        return blocks(element)
    label = ""
    for child in element:
        if isinstance(child.tag, str) and (child.tag == "summary" or is_admonition_title(child)):
            label = collapse(inline(child)).replace("\n", " ")
            child.drop_tree()
            break
    if not label:
        kinds = sorted(ADMONITION_CLASSES & classes(element) - {"admonition", "theme-admonition"})
        label = kinds[0].capitalize() if kinds else ""
    body = blocks(element)
    label = label.rstrip(":")
    return [f"**{label[:1].upper() + label[1:]}:**", *body] if label else body


def is_admonition_title(element: HtmlElement) -> bool:
    found = classes(element)
    return bool(ADMONITION_TITLE_CLASSES & found) or any(c.startswith("admonitionHeading") for c in found)


def quote(parts: list[str]) -> str:
    text = "\n\n".join(parts)
    return "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))


def element_to_markdown(root: HtmlElement) -> str:
    """Markdown of an (already sanitized) element."""
    return "\n\n".join(part for part in block(root) if part.strip()).strip()


class ToMarkdown(Step):
    """Set `page.markdown` from `page.main`."""

    def run(self, page: PageContext) -> None:
        if page.main is not None:
            page.markdown = element_to_markdown(page.main)
