"""Per-content-type page pipelines: a page's source in, its article as markdown (+ title, links) out.

HTML: parse -> metadata -> documented names -> noindex / nofollow -> links (whole page) -> main content -> hidden
text (evidence for injection flags, services/flags) -> sanitize -> markdown (with each documented name's offset).
Markdown and plain text pass through (markdown also yields a title and its links).
Crawled pages (services/fetchers) and ingested .html files (services/parsers/html.py) both come here.
"""

from __future__ import annotations

from services.core.markdown_lines import atx_heading
from services.net.robots import parse_llms_txt
from services.pages.api_names import ExtractApiNames
from services.pages.api_places import MarkApiNames, PlaceApiNames
from services.pages.base import EXTRACTOR_VERSION, ExtractedPage, PageContext, Step
from services.pages.hidden import FindHiddenText
from services.pages.indexing import DetectNoIndex
from services.pages.links import ExtractLinks
from services.pages.main_content import SelectMainContent
from services.pages.markdown import ToMarkdown
from services.pages.metadata import ExtractMetadata
from services.pages.parse import ParseHtml
from services.pages.sanitize import Sanitize

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown"})

HTML_STEPS: tuple[type[Step], ...] = (
    ParseHtml,
    ExtractMetadata,
    ExtractApiNames,
    DetectNoIndex,
    ExtractLinks,
    SelectMainContent,
    FindHiddenText,
    Sanitize,
    MarkApiNames,
    ToMarkdown,
    PlaceApiNames,
)


def markdown_title(text: str) -> str | None:
    """The first level-1 or level-2 heading of a markdown document (linear time: no regex)."""
    for line in text.split("\n"):
        heading = atx_heading(line, max_indent=0)
        if heading and heading[0] <= 2 and heading[1]:
            return heading[1]
    return None


class MarkdownPassThrough(Step):
    """Markdown is already the target form: keep it, take its first heading and links."""

    def run(self, page: PageContext) -> None:
        page.markdown = page.source.strip()
        page.title = markdown_title(page.source)
        if page.url:
            page.links = parse_llms_txt(page.source, page.url)


class TextPassThrough(Step):
    def run(self, page: PageContext) -> None:
        page.markdown = page.source.strip()


def steps_for(content_type: str) -> list[Step]:
    if content_type in HTML_TYPES:
        return [step() for step in HTML_STEPS]
    if content_type in MARKDOWN_TYPES:
        return [MarkdownPassThrough()]
    return [TextPassThrough()]


def extract_page(source: str, url: str | None = None, content_type: str = "text/html") -> ExtractedPage:
    """Run the pipeline for `content_type` (blocking and CPU-bound: call it from a worker thread)."""
    page = PageContext(source=source, url=url, content_type=content_type)
    for step in steps_for(content_type):
        step.run(page)
    metadata = dict(page.metadata)
    if content_type in HTML_TYPES:
        metadata.update(extractor=EXTRACTOR_VERSION, main_content=page.main_via)
    return ExtractedPage(title=page.title, markdown=page.markdown, links=page.links, metadata=metadata)


def extract_html(html: str, url: str | None = None) -> ExtractedPage:
    """The article of an HTML page as markdown, with its title, outlinks and metadata."""
    return extract_page(html, url, "text/html")
