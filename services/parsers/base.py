"""Document parser interface: a file's bytes to text (markdown where structure exists)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Separates the pages (PDF) or slides (PPTX) of a paged document's content: a line holding only a
#: form feed. Page N starts after the (N-1)th form feed, so page numbers can always be recovered
#: from the stored content (see services/chunking/pages.py); the line is blank, so the chunker
#: treats it as a paragraph break.
PAGE_BREAK = "\n\f\n"


@dataclass
class ParsedDocument:
    content: str
    title: str | None
    # "markdown", "text", "code", "html", "pdf", "json", "yaml", "toml", "rst",
    # "docx", "pptx", "xlsx", "csv", "epub", "odt", "rtf"
    document_type: str
    metadata: dict[str, Any] = field(default_factory=dict)
    #: the document's outlinks when its content no longer holds them (HTML, whose article markdown
    #: keeps no link targets); None: read them from the content (services/documents/ingest.py)
    links: list[str] | None = None


class DocumentParser(ABC):
    #: File extensions (lower-case, with dot) this parser handles.
    extensions: tuple[str, ...]

    @abstractmethod
    def parse(self, data: bytes, path: Path | None = None) -> ParsedDocument:
        """Parse raw bytes. Raises `services.core.errors.InvalidArgument` on unreadable input."""
