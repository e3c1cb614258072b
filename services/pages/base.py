"""The page pipeline's shared state and step interface.

A page goes through small steps (parse, metadata, links, main content, sanitize, markdown), each
in its own module; every step reads and fills one `PageContext`. Steps never raise for odd markup:
they leave the context as they found it and the next step copes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from lxml.html import HtmlElement

#: Bumped whenever extraction changes what a page's text is: a stored page extracted by an older
#: version is fetched again in full (no conditional request) on its next recrawl and re-chunked.
EXTRACTOR_VERSION = "pages-2"  # pages-2: noindex pages are no longer stored


@dataclass
class PageContext:
    """One page on its way through the pipeline."""

    source: str  # the page as received (HTML, markdown or plain text)
    url: str | None = None  # where it came from; relative links resolve against it
    content_type: str = "text/html"
    tree: HtmlElement | None = None  # the parsed document (HTML only)
    main: HtmlElement | None = None  # the article element the text is taken from
    main_via: str = ""  # how `main` was found: a generator selector's name, a library, or "body"
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    links: list[str] = field(default_factory=list)  # absolute outlinks (whole page, chrome included)
    markdown: str = ""
    api_marked: bool = False  # documented names' elements carry markers (services/pages/api_places.py)


@dataclass(frozen=True)
class ExtractedPage:
    """What the pipeline made of a page: its article as markdown, title, outlinks and metadata."""

    title: str | None
    markdown: str
    links: list[str]
    metadata: dict[str, Any]


class Step(ABC):
    """One stage of a page pipeline."""

    @abstractmethod
    def run(self, page: PageContext) -> None:
        """Read and update `page` in place."""
