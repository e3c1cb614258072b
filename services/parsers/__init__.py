"""Document parsers: pick one by file extension and turn a file's bytes into text.

Implementations are imported lazily, so e.g. pypdf is only loaded when a PDF is parsed. Each row names
its format's budget (services/core/budgets.py): the bytes it may read and characters it may write, its
structural limits, its wall time, and whether it is parsed in the limited worker pool.
"""

from __future__ import annotations

import importlib
import logging
from functools import cache
from pathlib import Path
from typing import NamedTuple

from services.core.budgets import Budget, budget
from services.core.errors import InvalidArgument
from services.core.settings import get_settings
from services.parsers.archives import check_archive
from services.parsers.base import DocumentParser, ParsedDocument
from services.parsers.text import TEXT_EXTENSIONS, looks_binary

logger = logging.getLogger(__name__)

__all__ = [
    "REGISTRY",
    "DocumentParser",
    "ParsedDocument",
    "ParserEntry",
    "get_parser",
    "parse_bytes",
    "parser_budget",
    "supported_extensions",
]


class ParserEntry(NamedTuple):
    """One parser: where it lives, the extensions it takes, and the name of its budget."""

    module: str
    class_name: str
    extensions: tuple[str, ...]
    budget: str  # a row of services.core.budgets.BUDGETS


#: Every parser. Each class's `extensions` must match; a new row names its budget or a test fails.
REGISTRY: tuple[ParserEntry, ...] = (
    ParserEntry("services.parsers.text", "TextParser", TEXT_EXTENSIONS, "text"),
    ParserEntry("services.parsers.structured", "StructuredParser", (".json", ".yaml", ".yml", ".toml"), "structured"),
    ParserEntry("services.parsers.html", "HtmlParser", (".html", ".htm", ".xhtml"), "html"),
    ParserEntry("services.parsers.pdf", "PdfParser", (".pdf",), "pdf"),
    ParserEntry("services.parsers.word", "DocxParser", (".docx",), "office"),
    ParserEntry("services.parsers.slides", "PptxParser", (".pptx",), "office"),
    ParserEntry("services.parsers.spreadsheet", "XlsxParser", (".xlsx", ".xlsm"), "spreadsheet"),
    ParserEntry("services.parsers.spreadsheet", "CsvParser", (".csv", ".tsv"), "csv"),
    ParserEntry("services.parsers.ebook", "EpubParser", (".epub",), "office"),
    ParserEntry("services.parsers.opendocument", "OdtParser", (".odt",), "office"),
    ParserEntry("services.parsers.rtf", "RtfParser", (".rtf",), "rtf"),
)

#: Extensions whose content is legitimately binary (skip the NUL-byte check).
_BINARY_EXTENSIONS: frozenset[str] = frozenset({".pdf", ".docx", ".pptx", ".xlsx", ".xlsm", ".epub", ".odt"})

_BY_EXTENSION: dict[str, ParserEntry] = {extension: entry for entry in REGISTRY for extension in entry.extensions}

_TEXT_PARSER = REGISTRY[0]


def supported_extensions() -> list[str]:
    """Every supported file extension (lower-case, with the dot), sorted."""
    return sorted(_BY_EXTENSION)


@cache
def _load_parser(module_name: str, class_name: str) -> DocumentParser:
    """Import a parser module on first use and return a shared instance of its parser."""
    parser_class = getattr(importlib.import_module(module_name), class_name)
    return parser_class()


def _entry(path: Path) -> ParserEntry:
    """The registry row for `path`'s extension (text without one); InvalidArgument for unknown ones."""
    extension = path.suffix.lower()
    if not extension:
        return _TEXT_PARSER
    entry = _BY_EXTENSION.get(extension)
    if entry is None:
        supported = ", ".join(supported_extensions())
        raise InvalidArgument(
            f"Unsupported file type '{extension}' ({path.name})",
            suggestion=f"Supported extensions: {supported}. Convert the file to one of these "
            "(e.g. markdown, text or PDF) first.",
        )
    return entry


def parser_budget(path: Path) -> Budget:
    """The budget of the parser for `path` (InvalidArgument for an unsupported extension)."""
    return budget(_entry(path).budget)


def get_parser(path: Path) -> DocumentParser:
    """The parser for `path`, chosen by extension (case-insensitive).

    A file without an extension (README, Makefile, .gitignore) is treated as text. An unknown
    extension raises InvalidArgument listing the supported ones.
    """
    entry = _entry(path)
    return _load_parser(entry.module, entry.class_name)


def parse_bytes(data: bytes, path: Path, max_file_bytes: int | None = None) -> ParsedDocument:
    """Parse a file's bytes with the parser for `path`, in this process (see services.parsers.isolation
    for parsing in a limited worker, off the event loop).

    Raises InvalidArgument for unsupported extensions, binary data (NUL bytes in the first
    8 KB) where text is expected, ZIP bombs (services.parsers.archives; the cap defaults to
    ARCHIVIST_MAX_FILE_MB) and content the parser rejects; OverBudget for input or output over the
    format's budget (and structure, where the parser counts it).
    """
    parser, limits = get_parser(path), parser_budget(path)
    file_cap = get_settings().max_file_bytes if max_file_bytes is None else max_file_bytes
    limits.check_input(len(data), file_cap, path.name)
    check_archive(data, path, file_cap)
    if path.suffix.lower() not in _BINARY_EXTENSIONS and looks_binary(data):
        raise InvalidArgument(
            f"{path.name} looks like a binary file (NUL bytes in its first 8 KB), not text",
            suggestion="Only text, HTML, PDF and office/e-book files can be added; convert the file first.",
        )
    try:
        document = parser.parse(data, path)
    except RecursionError:  # a parser that recurses per nesting level, on content nested deeper than it goes
        raise limits.over(f"{path.name} is nested too deeply to parse") from None
    limits.check_output(len(document.content), f"the text of {path.name}")
    logger.debug("parsed %s as %s: %d chars", path.name, document.document_type, len(document.content))
    return document
