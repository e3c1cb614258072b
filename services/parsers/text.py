"""Parser for plain text, markdown, reStructuredText, CSV and source code.

Content is kept exactly as decoded (code is *not* wrapped in fences) so chunk offsets map
back onto the original file.
"""

from __future__ import annotations

import codecs
import logging
import re
from pathlib import Path

from services.core.errors import InvalidArgument
from services.core.markdown_lines import atx_heading
from services.parsers.base import DocumentParser, ParsedDocument

logger = logging.getLogger(__name__)

#: How many leading bytes are inspected when deciding whether data is binary.
BINARY_SNIFF_BYTES = 8192

MARKDOWN_EXTENSIONS: tuple[str, ...] = (".md", ".markdown", ".mdx")
RST_EXTENSIONS: tuple[str, ...] = (".rst",)
PLAIN_EXTENSIONS: tuple[str, ...] = (".txt", ".text", ".log")
CSV_EXTENSIONS: tuple[str, ...] = (".csv", ".tsv")

#: Source-code extensions and the language name reported in metadata.
CODE_LANGUAGES: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".tsx": "tsx",
    ".jsx": "jsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cpp": "cpp",
    ".cc": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
    ".sh": "bash",
    ".bash": "bash",
    ".zsh": "zsh",
    ".sql": "sql",
    ".swift": "swift",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".scala": "scala",
    ".css": "css",
    ".scss": "scss",
    ".less": "less",
    ".lua": "lua",
    ".pl": "perl",
    ".r": "r",
    ".dart": "dart",
    ".ex": "elixir",
    ".exs": "elixir",
    ".hs": "haskell",
    ".vue": "vue",
    ".svelte": "svelte",
    ".ps1": "powershell",
    ".proto": "protobuf",
    ".graphql": "graphql",
    ".tf": "terraform",
    ".ini": "ini",
    ".cfg": "ini",
    ".xml": "xml",
}

#: Extension-less file names that are source code.
CODE_FILENAMES: dict[str, str] = {
    "dockerfile": "dockerfile",
    "containerfile": "dockerfile",
    "makefile": "makefile",
    "gnumakefile": "makefile",
    "rakefile": "ruby",
    "gemfile": "ruby",
    "jenkinsfile": "groovy",
}

#: CSV/TSV are parsed into markdown tables by services.parsers.spreadsheet, not here.
TEXT_EXTENSIONS: tuple[str, ...] = MARKDOWN_EXTENSIONS + RST_EXTENSIONS + PLAIN_EXTENSIONS + tuple(CODE_LANGUAGES)

_UNICODE_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)

_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _utf16_or_32_encoding(data: bytes) -> str | None:
    """The codec named by a UTF-16/32 byte-order mark at the start of `data`, if any."""
    for bom, encoding in _UNICODE_BOMS:
        if data.startswith(bom):
            return encoding
    return None


def looks_binary(data: bytes) -> bool:
    """True when the first 8 KB contain a NUL byte (and the data is not BOM-marked UTF-16/32)."""
    if _utf16_or_32_encoding(data) is not None:
        return False
    return b"\x00" in data[:BINARY_SNIFF_BYTES]


def decode_text(data: bytes) -> str:
    """Decode bytes as UTF-8 (a BOM is dropped); fall back to latin-1, which never fails.

    BOM-marked UTF-16/32 is honoured as well.
    """
    bom_encoding = _utf16_or_32_encoding(data)
    if bom_encoding is not None:
        try:
            return data.decode(bom_encoding)
        except UnicodeDecodeError:
            logger.debug("data has a %s BOM but does not decode as such", bom_encoding)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        logger.debug("data is not valid UTF-8; decoding as latin-1")
        return data.decode("latin-1")


def markdown_title(text: str) -> str | None:
    """Text of the first level-1 ATX heading (`# Title`) outside fenced code, or None."""
    fence: str | None = None
    for line in text.split("\n"):
        line = line.rstrip("\r")
        fence_match = _FENCE_RE.match(line)
        if fence is not None:
            if fence_match and fence_match.group(1)[0] == fence[0] and len(fence_match.group(1)) >= len(fence):
                if not line.strip().lstrip(fence[0]):
                    fence = None
            continue
        if fence_match:
            fence = fence_match.group(1)
            continue
        heading = atx_heading(line)
        if heading and heading[0] == 1 and heading[1]:
            return heading[1]
    return None


def classify(path: Path | None) -> tuple[str, dict[str, str]]:
    """The document_type and metadata for a text file, judged from its name."""
    if path is None:
        return "text", {}
    suffix = path.suffix.lower()
    if suffix in MARKDOWN_EXTENSIONS:
        return "markdown", {}
    if suffix in RST_EXTENSIONS:
        return "rst", {}
    if suffix in CSV_EXTENSIONS:
        return "text", {"format": suffix.lstrip(".")}
    language = CODE_LANGUAGES.get(suffix) or (CODE_FILENAMES.get(path.name.lower()) if not suffix else None)
    if language is not None:
        return "code", {"language": language}
    return "text", {}


class TextParser(DocumentParser):
    """Text-like files: markdown, rst, plain text, CSV and source code (kept verbatim)."""

    extensions = TEXT_EXTENSIONS

    def parse(self, data: bytes, path: Path | None = None) -> ParsedDocument:
        """Decode `data`; the title is the first `# ` heading for markdown, otherwise None."""
        name = path.name if path is not None else "document"
        if looks_binary(data):
            raise InvalidArgument(
                f"{name} looks like a binary file (NUL bytes in its first 8 KB), not text",
                suggestion="Convert it to a text format (markdown, plain text) or PDF before adding it.",
            )
        content = decode_text(data)
        document_type, metadata = classify(path)
        title = markdown_title(content) if document_type == "markdown" else None
        return ParsedDocument(content=content, title=title, document_type=document_type, metadata=metadata)
