"""ZIP bombs are refused before any parser opens them.

DOCX, PPTX, XLSX, EPUB and OpenDocument files are ZIP archives. Their central directory declares
every member's uncompressed size, and Python's zipfile never inflates a member past its declared
size, so summing the declarations bounds what a parser can be made to inflate. A file is refused
when that sum is over the budget (10x the file-size cap) or when it inflates past the file cap at
more than 100:1, a ratio real office documents do not reach.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import PurePath

from services.core.budgets import budget
from services.core.errors import InvalidArgument

#: Extensions of the ZIP-based formats.
ZIP_EXTENSIONS = frozenset({".docx", ".pptx", ".xlsx", ".xlsm", ".epub", ".odt", ".ods", ".odp"})
#: The declared uncompressed total may be at most this many times the file-size cap.
EXPANSION_BUDGET = 10
#: Past the file-size cap, an archive may inflate at most this many times its own size.
MAX_RATIO = 100
#: More members than this is not a document (each member costs a parser a file object).
MAX_MEMBERS = budget("office").structure


def check_archive(data: bytes, path: PurePath, max_file_bytes: int) -> None:
    """Refuse a ZIP-based document whose declared contents are too large or too compressed."""
    if path.suffix.lower() not in ZIP_EXTENSIONS:
        return
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return  # not a ZIP at all: its parser says so in its own words
    expanded = sum(member.file_size for member in members)
    _check_totals(path.name, len(members), expanded, len(data), max_file_bytes)


def _check_totals(name: str, members: int, expanded: int, size: int, max_file_bytes: int) -> None:
    """The limits themselves, on the numbers read from the central directory."""
    budget = EXPANSION_BUDGET * max_file_bytes
    if members > MAX_MEMBERS:
        raise InvalidArgument(
            f"{name} holds {members} files; documents hold at most {MAX_MEMBERS}.",
            "This does not look like a document; convert it to PDF or text first.",
        )
    if expanded > budget:
        raise InvalidArgument(
            f"{name} inflates to {expanded / 1048576:.0f} MB, over the {budget / 1048576:.0f} MB limit "
            f"({EXPANSION_BUDGET}x ARCHIVIST_MAX_FILE_MB).",
            "Split the document, or raise ARCHIVIST_MAX_FILE_MB on the server.",
        )
    if expanded > max_file_bytes and expanded > MAX_RATIO * max(size, 1):
        raise InvalidArgument(
            f"{name} inflates {expanded // max(size, 1)}:1 (to {expanded / 1048576:.0f} MB): "
            f"archives compressed over {MAX_RATIO}:1 are refused as possible ZIP bombs.",
            "Open and re-save the document in its application, or convert it to PDF or text.",
        )
