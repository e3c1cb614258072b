"""Documents: shared constants and pure helpers (hashing, titles, metadata checks, page text)."""

from __future__ import annotations

import hashlib
import json
import mimetypes
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from models import Document, IngestResult
from services.core.errors import InvalidArgument, ServiceError, Unavailable
from services.core.markdown_lines import atx_heading, has_inline_link, starts_like_markdown
from services.core.settings import Settings
from services.fetchers.base import FetchResult
from services.parsers.isolation import parse_file

DOC_HINT = "Use manage_document(action='list', source_id=...) to find document ids."
DOCUMENT_COLUMNS = (
    "id, source_id, title, url, document_type, content_hash, length(content) AS content_length, "
    "octet_length(content) AS size_bytes, metadata, chunk_count, created_at, updated_at, fetched_at, ingested_at, "
    "indexed_at"
)
#: With DOCUMENT_COLUMNS where documents are read (get, list): whether any chunk waits for its vector.
EMBEDDING_PENDING = (
    "EXISTS (SELECT 1 FROM chunks pc WHERE pc.document_id = documents.id AND pc.embedding IS NULL) AS embedding_pending"
)
# Column order of the records written to `chunks` with COPY.
CHUNK_COLUMNS = [
    "document_id",
    "source_id",
    "chunk_index",
    "text",
    "char_start",
    "char_end",
    "heading_path",
    "context",
    "embedding",
    "page_start",
    "page_end",
    "embedded_at",
    "flags",
]
WINDOW_SIZE = 1000
MAX_METADATA_BYTES = 16_384
MAX_DIRECTORY_FILES = 1000
DIRECTORY_BATCH = 32

ProgressFn = Callable[[Path, IngestResult | None, str | None], None]


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def embedding_text(title: str, heading_path: list[str], text: str) -> str:
    """What is embedded for a chunk: the document title and heading path give it context."""
    header = " > ".join([title, *heading_path]) if heading_path else title
    return f"{header}\n\n{text}"


def chunk_context(title: str, heading_path: list[str]) -> str:
    return " ".join([title, *heading_path])


def guess_title(content: str, fallback: str = "Untitled") -> str:
    """First markdown heading, else the first non-empty line, cut to 200 characters (linear time)."""
    lines = content.split("\n")
    for line in lines:
        heading = atx_heading(line, max_indent=0)
        if heading and heading[1]:
            return heading[1][:200]
    for line in lines:
        if line.strip():
            return line.strip()[:200]
    return fallback


def guess_text_type(content: str) -> str:
    """ "markdown" when a line opens a heading, fence or list item, or the text holds a link; else "text"."""
    if any(starts_like_markdown(line) for line in content.split("\n")) or has_inline_link(content):
        return "markdown"
    return "text"


def check_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise InvalidArgument("metadata must be a JSON object.", 'Pass metadata like {"author": "..."}.')
    size = len(json.dumps(metadata, default=str))
    if size > MAX_METADATA_BYTES:
        raise InvalidArgument(
            f"metadata is {size} bytes, over the {MAX_METADATA_BYTES}-byte limit.", "Store less metadata."
        )
    return metadata


#: answers that say "not now" rather than "not here": the same request may well work later
TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


def fetch_failure(page: FetchResult) -> ServiceError:
    """Why a page could not be fetched: retryable when the host did not answer (timeout, network error)
    or answered with a temporary error; otherwise the URL itself is wrong (404, blocked, ...)."""
    detail = page.error or f"HTTP {page.status}"
    no_answer = page.status == 0 and (page.error or "").startswith(("timeout", "network error"))
    if no_answer or page.status in TRANSIENT_STATUSES:
        return Unavailable(
            f"Could not fetch {page.url}: {detail}",
            "The site did not answer, or answered with a temporary error: check the address, then retry later.",
            retryable=True,
        )
    return InvalidArgument(
        f"Could not fetch {page.url}: {detail}", "Check the URL in a browser; only text pages and PDFs are ingested."
    )


async def page_content(page: FetchResult, settings: Settings) -> tuple[str | None, str, str]:
    """(title, text, document_type) of a fetched page; errors name the HTTP outcome. A PDF is parsed
    in a limited worker process (services.parsers.isolation)."""
    if not page.ok:
        raise fetch_failure(page)
    if page.raw is not None:  # the fetcher hands over raw bytes for PDFs, JSON and YAML
        parsed = await parse_file(page.raw, Path("page" + RAW_SUFFIXES.get(page.content_type, ".pdf")), settings)
        return parsed.title, parsed.content, parsed.document_type
    if not page.markdown.strip():
        raise InvalidArgument(f"{page.url} has no text content.", "Pages rendered by JavaScript need browser mode.")
    return page.title, page.markdown, PAGE_TYPES.get(page.content_type.split(";")[0].strip().lower(), "html")


#: The file suffix a raw (non-PDF) body is parsed as, by media type.
RAW_SUFFIXES = {"application/json": ".json", "application/vnd.oai.openapi+json": ".json"} | dict.fromkeys(
    ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "application/vnd.oai.openapi"), ".yaml"
)
PAGE_TYPES = {"text/markdown": "markdown", "text/x-markdown": "markdown", "text/plain": "text"}


@dataclass
class NewDocument:
    """One document to ingest."""

    title: str
    content: str
    document_type: str
    url: str | None = None
    metadata: dict[str, Any] | None = None
    #: outlinks known from the source (an HTML file's); None: read from the content (markdown)
    links: list[str] | None = None


#: Media types of the document types a parser reports (services/parsers), where a file name tells nothing.
MIME_TYPES = {
    "markdown": "text/markdown",
    "text": "text/plain",
    "rst": "text/x-rst",
    "html": "text/html",
    "code": "text/plain",
    "json": "application/json",
    "yaml": "application/yaml",
    "toml": "application/toml",
    "pdf": "application/pdf",
}


def mime_type(document: Document) -> str:
    """The document's media type: the Content-Type it was served with, else its file name's, else its type's."""
    meta = document.metadata or {}
    served = meta.get("content_type")
    if isinstance(served, str) and served.strip():
        return served.split(";", 1)[0].strip().lower()
    for name in (meta.get("path"), meta.get("file_path"), document.title):
        if isinstance(name, str) and "." in name:
            guessed = mimetypes.guess_type(name, strict=False)[0]
            if guessed:
                return guessed
    guessed = mimetypes.guess_type(f"file.{document.document_type}", strict=False)[0]
    return MIME_TYPES.get(document.document_type) or guessed or "application/octet-stream"


def _to_document(row: asyncpg.Record) -> Document:
    return Document(**dict(row))
