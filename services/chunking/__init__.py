"""Chunkers: split a parsed document's content into overlapping, offset-exact chunks."""

from __future__ import annotations

from services.chunking.base import Chunk, Chunker
from services.chunking.markdown import ChunkMode, MarkdownChunker
from services.settings import Settings, get_settings

__all__ = ["Chunk", "Chunker", "MarkdownChunker", "get_chunker"]

#: Document types whose content is not prose: no heading/fence detection, no sentence breaks
#: (`#` starts a comment in Python, YAML, TOML, shell, ...).
_CODE_TYPES = frozenset({"code", "json", "yaml", "toml"})
#: Prose without markdown structure: sentence breaks, but `#` lines are not headings.
_TEXT_TYPES = frozenset({"text", "rst"})


def _mode_for(document_type: str | None) -> ChunkMode:
    """The chunking mode for a ParsedDocument.document_type (markdown when unknown)."""
    if document_type in _CODE_TYPES:
        return "code"
    if document_type in _TEXT_TYPES:
        return "text"
    return "markdown"


def get_chunker(settings: Settings | None = None, *, document_type: str | None = None) -> Chunker:
    """A chunker sized by `settings.chunk_size` / `settings.chunk_overlap` (default: get_settings()).

    `document_type` (optional, a ParsedDocument.document_type) turns off markdown heading
    detection for code and data files, and sentence splitting for code.
    """
    settings = settings or get_settings()
    return MarkdownChunker(settings.chunk_size, settings.chunk_overlap, mode=_mode_for(document_type))
