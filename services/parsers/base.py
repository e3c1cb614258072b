"""Document parser interface: a file's bytes to text (markdown where structure exists)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ParsedDocument:
    content: str
    title: str | None
    document_type: str  # "markdown", "text", "code", "html", "pdf", "json", "yaml", "toml", "rst"
    metadata: dict[str, Any] = field(default_factory=dict)


class DocumentParser(ABC):
    #: File extensions (lower-case, with dot) this parser handles.
    extensions: tuple[str, ...]

    @abstractmethod
    def parse(self, data: bytes, path: Path | None = None) -> ParsedDocument:
        """Parse raw bytes. Raises `services.errors.InvalidArgument` on unreadable input."""
