"""Jinja2 environment, safe markdown rendering and search-term highlighting for the console."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup, escape

TEMPLATES = Path(__file__).parent / "templates"
# Raw HTML in documents is not passed through (html=False): it shows as text. markdown-it also refuses
# javascript:, vbscript:, file: and data: (except images) link targets.
_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
MAX_RENDERED_CHARS = 200_000


def markdown_html(text: str) -> Markup:
    return Markup(_markdown.render(text[:MAX_RENDERED_CHARS]))


#: documents whose text is lines, not markdown: shown with their line breaks kept
LINE_TYPES = frozenset({"pdf", "text"})


def pages(text: str) -> list[str]:
    """A document's text split at its page breaks (a form feed between pages, services/parsers/base.py),
    so a page shows as a labelled section instead of a control character."""
    return [page.strip("\n") for page in text.split("\f")]


def query_terms(query: str) -> list[str]:
    words = {w.lower() for w in re.findall(r"\w{3,}", query or "")}
    return sorted(words, key=len, reverse=True)[:20]


def highlight(text: str, query: str) -> Markup:
    """Escaped text with every word of the query (3+ letters, word start, any ending) in <mark>."""
    terms = query_terms(query)
    if not terms:
        return escape(text)
    pattern = re.compile(r"(\b(?:" + "|".join(re.escape(t) for t in terms) + r")\w*)", re.IGNORECASE)
    parts = pattern.split(text)
    out = [escape(p) if i % 2 == 0 else Markup("<mark>") + escape(p) + Markup("</mark>") for i, p in enumerate(parts)]
    return Markup("").join(out)


def when(value: datetime | None) -> str:
    if value is None:
        return "—"
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def number(value: Any) -> str:
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


def build_environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=select_autoescape(["html"], default_for_string=True, default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = when
    env.filters["number"] = number
    env.filters["markdown"] = markdown_html
    env.filters["pages"] = pages
    env.globals["LINE_TYPES"] = LINE_TYPES
    env.globals["highlight"] = highlight
    return env
