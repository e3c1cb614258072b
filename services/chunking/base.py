"""Chunker interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field


@dataclass
class Chunk:
    text: str
    char_start: int
    char_end: int
    heading_path: list[str] = field(default_factory=list)
    #: First and last page (PDF) or slide (PPTX) the chunk's text is on, 1-based; None when unpaged.
    page_start: int | None = None
    page_end: int | None = None


class Chunker(ABC):
    @abstractmethod
    def chunk(self, content: str) -> list[Chunk]:
        """Split content; for every chunk `content[c.char_start:c.char_end] == c.text`."""
