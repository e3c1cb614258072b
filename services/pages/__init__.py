"""Page extraction: a page's article as markdown, title, absolute outlinks and metadata.

One implementation for crawled pages and ingested HTML files; each step is a small module
(parse, metadata, links, main_content, sanitize, markdown) run in order by `pipeline`.
"""

from services.pages.base import EXTRACTOR_VERSION, ExtractedPage
from services.pages.pipeline import extract_html, extract_page

__all__ = ["EXTRACTOR_VERSION", "ExtractedPage", "extract_html", "extract_page"]
