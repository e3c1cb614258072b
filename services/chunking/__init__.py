"""Chunkers: split a parsed document's content into overlapping, offset-exact chunks."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from services.chunking.base import Chunk, Chunker
from services.chunking.markdown import ChunkMode, MarkdownChunker
from services.chunking.pages import PAGED_TYPES, PagedMarkdownChunker
from services.core.settings import Settings, get_settings

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


def get_chunker(
    settings: Settings | None = None, *, document_type: str | None = None, metadata: dict[str, Any] | None = None
) -> Chunker:
    """A chunker sized by `settings.chunk_size` / `settings.chunk_overlap` (default: get_settings()).

    `document_type` (optional, a ParsedDocument.document_type) turns off markdown heading
    detection for code and data files, and sentence splitting for code. Source code whose
    `metadata["language"]` has a tree-sitter grammar is split at definitions (services.chunking.code,
    heading path starting with the name of `metadata["file_path"]`); paged documents (PDF, PPTX)
    get page numbers (services.chunking.pages).
    """
    settings = settings or get_settings()
    metadata = metadata or {}
    if document_type == "code":
        from services.chunking import code

        language = metadata.get("language")
        if code.supports(language):
            file_path = metadata.get("file_path")
            file_name = PurePath(file_path).name if isinstance(file_path, str) and file_path else None
            return code.CodeChunker(settings.chunk_size, settings.chunk_overlap, language, file_name)
    if document_type in PAGED_TYPES:
        return PagedMarkdownChunker(settings.chunk_size, settings.chunk_overlap, mode=_mode_for(document_type))
    return MarkdownChunker(settings.chunk_size, settings.chunk_overlap, mode=_mode_for(document_type))
