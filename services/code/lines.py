"""The line index: a synced code or text file's lines, stored in blocks of a few KB (sql/037).

A row per line would cost more than the code itself (a PostgreSQL row carries ~30 bytes of header and
every line its own trigram postings); blocks of ~4 KB keep the heap compressed and the trigram index
small, and grep splits a candidate block into its lines (services/code/grep.py). Lines are the text
between "\\n" (a "\\r" before it dropped), numbered from 1, exactly as the file reads.

A line longer than LINE_CAP characters (a minified bundle) gets blocks of its own whose segments are
overlapping pieces of it, so it stays matchable without one huge row: a match shorter than
PIECE_OVERLAP characters is always found whole inside one piece (the overlap spans block borders too).

Only files parsed verbatim are indexed (services/parsers/text.py keeps code, markdown and plain text
as decoded): their lines are the file's lines. `write_lines` is the one call ingest makes, inside the
transaction that writes the document's chunks.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any
from uuid import UUID

import asyncpg

from services.parsers.text import CODE_FILENAMES, CSV_EXTENSIONS, TEXT_EXTENSIONS

BLOCK_CHARS = 4096  # a block closes once it holds this many characters
BLOCK_LINES = 200  # or this many lines (short lines: fewer rows to split)
LINE_CAP = 4096  # longer lines are stored as overlapping pieces, in a block of their own
PIECE_OVERLAP = 512
PIECES_PER_BLOCK = 16  # a long line's pieces fill several blocks of ~64 KB (a 5 MB line: ~90 rows)
COLUMNS = ("source_id", "document_id", "line_start", "line_end", "text")


def indexed(metadata: dict[str, Any] | None) -> bool:
    """Whether a document is a file whose stored text is its lines as they are: a synced or ingested
    file (metadata `path`) that the verbatim text parser reads (code, markdown, rst, plain text)."""
    path = (metadata or {}).get("path")
    if not isinstance(path, str) or not path:
        return False
    name = PurePosixPath(path)
    suffix = name.suffix.lower()
    if suffix in CSV_EXTENSIONS:
        return False  # a CSV is stored as a markdown table
    return suffix in TEXT_EXTENSIONS or (not suffix and name.name.lower() in CODE_FILENAMES)


def split_lines(content: str) -> list[str]:
    """The file's lines: split at "\\n", a trailing "\\r" dropped; a final newline ends the last line."""
    lines = content.split("\n")
    if lines and lines[-1] == "" and len(lines) > 1:
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def pieces(line: str) -> list[str]:
    """A long line as overlapping pieces of LINE_CAP characters (each starts PIECE_OVERLAP before the
    previous one ends)."""
    out, start = [], 0
    while True:
        out.append(line[start : start + LINE_CAP])
        if start + LINE_CAP >= len(line):
            return out
        start += LINE_CAP - PIECE_OVERLAP


def blocks(content: str) -> Iterator[tuple[int, int, str]]:
    """(line_start, line_end, text) of each block of the content's lines."""
    held: list[str] = []
    start, size = 1, 0
    for number, line in enumerate(split_lines(content), 1):
        if len(line) > LINE_CAP:
            if held:
                yield start, number - 1, "\n".join(held)
            parts = pieces(line)
            for i in range(0, len(parts), PIECES_PER_BLOCK):
                yield number, number, "\n".join(parts[i : i + PIECES_PER_BLOCK])
            start, held, size = number + 1, [], 0
            continue
        held.append(line)
        size += len(line) + 1
        if size >= BLOCK_CHARS or len(held) >= BLOCK_LINES:
            yield start, number, "\n".join(held)
            start, held, size = number + 1, [], 0
    if held:
        yield start, start + len(held) - 1, "\n".join(held)


def segments(line_start: int, line_end: int, text: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of each segment of a stored block (a long line's pieces share its number)."""
    parts = text.split("\n")
    if line_start == line_end:
        for part in parts:
            yield line_start, part
        return
    yield from enumerate(parts, line_start)


async def write_lines(
    conn: asyncpg.Connection,
    document_id: UUID,
    source_id: UUID,
    content: str,
    metadata: dict[str, Any] | None,
    fresh: bool = False,
) -> None:
    """Replace the document's line blocks (in the caller's transaction): none unless `indexed`.
    `fresh`: the document was inserted by this transaction (no blocks to delete)."""
    if not fresh:
        await conn.execute("DELETE FROM code_blocks WHERE document_id = $1", document_id)
    if not indexed(metadata):
        return
    records = [(source_id, document_id, a, b, text.replace("\x00", "")) for a, b, text in blocks(content)]
    await conn.copy_records_to_table("code_blocks", records=records, columns=COLUMNS)
