"""Document parsers: pick one by file extension and turn a file's bytes into text.

Implementations are imported lazily, so e.g. pypdf is only loaded when a PDF is parsed.
"""

from __future__ import annotations

import importlib
import logging
from functools import cache
from pathlib import Path

from services.errors import InvalidArgument
from services.parsers.archives import check_archive
from services.parsers.base import DocumentParser, ParsedDocument
from services.parsers.text import TEXT_EXTENSIONS, looks_binary
from services.settings import get_settings

logger = logging.getLogger(__name__)

__all__ = ["DocumentParser", "ParsedDocument", "get_parser", "parse_bytes", "supported_extensions"]

#: (module, class, extensions) for every parser. Each class's `extensions` must match.
_REGISTRY: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("services.parsers.text", "TextParser", TEXT_EXTENSIONS),
    ("services.parsers.structured", "StructuredParser", (".json", ".yaml", ".yml", ".toml")),
    ("services.parsers.html", "HtmlParser", (".html", ".htm", ".xhtml")),
    ("services.parsers.pdf", "PdfParser", (".pdf",)),
    ("services.parsers.word", "DocxParser", (".docx",)),
    ("services.parsers.slides", "PptxParser", (".pptx",)),
    ("services.parsers.spreadsheet", "XlsxParser", (".xlsx", ".xlsm")),
    ("services.parsers.spreadsheet", "CsvParser", (".csv", ".tsv")),
    ("services.parsers.ebook", "EpubParser", (".epub",)),
    ("services.parsers.opendocument", "OdtParser", (".odt",)),
    ("services.parsers.rtf", "RtfParser", (".rtf",)),
)

#: Extensions whose content is legitimately binary (skip the NUL-byte check).
_BINARY_EXTENSIONS: frozenset[str] = frozenset({".pdf", ".docx", ".pptx", ".xlsx", ".xlsm", ".epub", ".odt"})

_BY_EXTENSION: dict[str, tuple[str, str]] = {
    extension: (module, class_name) for module, class_name, extensions in _REGISTRY for extension in extensions
}

_TEXT_PARSER = ("services.parsers.text", "TextParser")


def supported_extensions() -> list[str]:
    """Every supported file extension (lower-case, with the dot), sorted."""
    return sorted(_BY_EXTENSION)


@cache
def _load_parser(module_name: str, class_name: str) -> DocumentParser:
    """Import a parser module on first use and return a shared instance of its parser."""
    parser_class = getattr(importlib.import_module(module_name), class_name)
    return parser_class()


def get_parser(path: Path) -> DocumentParser:
    """The parser for `path`, chosen by extension (case-insensitive).

    A file without an extension (README, Makefile, .gitignore) is treated as text. An unknown
    extension raises InvalidArgument listing the supported ones.
    """
    extension = path.suffix.lower()
    if not extension:
        return _load_parser(*_TEXT_PARSER)
    entry = _BY_EXTENSION.get(extension)
    if entry is None:
        supported = ", ".join(supported_extensions())
        raise InvalidArgument(
            f"Unsupported file type '{extension}' ({path.name})",
            suggestion=f"Supported extensions: {supported}. Convert the file to one of these "
            "(e.g. markdown, text or PDF) first.",
        )
    return _load_parser(*entry)


def parse_bytes(data: bytes, path: Path, max_file_bytes: int | None = None) -> ParsedDocument:
    """Parse a file's bytes with the parser for `path`, in this process (see services.parsers.isolation
    for parsing in a limited worker, off the event loop).

    Raises InvalidArgument for unsupported extensions, binary data (NUL bytes in the first
    8 KB) where text is expected, ZIP bombs (services.parsers.archives; the cap defaults to
    ARCHIVIST_MAX_FILE_MB) and content the parser rejects.
    """
    parser = get_parser(path)
    check_archive(data, path, get_settings().max_file_bytes if max_file_bytes is None else max_file_bytes)
    if path.suffix.lower() not in _BINARY_EXTENSIONS and looks_binary(data):
        raise InvalidArgument(
            f"{path.name} looks like a binary file (NUL bytes in its first 8 KB), not text",
            suggestion="Only text, HTML, PDF and office/e-book files can be added; convert the file first.",
        )
    document = parser.parse(data, path)
    logger.debug("parsed %s as %s: %d chars", path.name, document.document_type, len(document.content))
    return document
