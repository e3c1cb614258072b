"""Small markdown writers shared by the office-format parsers (headings, lists, tables)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from services.core.budgets import budget
from services.core.errors import InvalidArgument

#: A long table is written as several tables of this many rows, each repeating the header row,
#: so every chunk of a big sheet still says what its columns are.
TABLE_BLOCK_ROWS = 20
#: A table is written only when rows x columns stays within this budget: short rows are padded to the
#: widest one, so one row of 100,000 commas would make every other row 100,000 cells wide.
TABLES = budget("csv")

_SPACE_RE = re.compile(r"[ \t\r\n\f\v]+")


def one_line(text: str) -> str:
    """Collapse all whitespace (line breaks included) to single spaces and strip."""
    return _SPACE_RE.sub(" ", text).strip()


def paragraph(text: str) -> str:
    """One line of body text; a leading `#` or code fence is escaped so it is not read as markup."""
    text = one_line(text)
    return "\\" + text if text.startswith(("#", "```", "~~~")) else text


def heading(level: int, text: str) -> str:
    """An ATX heading (`## Text`), level clamped to 1..6; empty text gives ""."""
    text = one_line(text)
    return f"{'#' * min(max(level, 1), 6)} {text}" if text else ""


def list_item(text: str, depth: int = 0, ordered: bool = False) -> str:
    """A markdown list item indented two spaces per nesting level."""
    return f"{'  ' * max(depth, 0)}{'1.' if ordered else '-'} {one_line(text)}"


def cell_text(value: Any) -> str:
    """A table cell: None is empty, floats lose a trailing .0, pipes are escaped, one line."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return one_line(str(value)).replace("|", "\\|")


def _trim_rows(rows: Iterable[Sequence[Any]]) -> list[list[str]]:
    """Cells as text; drop empty rows and the empty columns on the right of every row. OverBudget when
    the padded table would pass the table budget's cells."""
    cleaned = [[cell_text(value) for value in row] for row in rows]
    cleaned = [row for row in cleaned if any(row)]
    width = max((max(i for i, value in enumerate(row) if value) + 1 for row in cleaned), default=0)
    if width * len(cleaned) > TABLES.structure:
        raise TABLES.over(
            f"a table of {len(cleaned):,} rows by {width:,} columns is more than {TABLES.structure:,} table cells",
            "Split the table, or convert it to text.",
        )
    return [(row + [""] * width)[:width] for row in cleaned]


def markdown_table(rows: Iterable[Sequence[Any]], block_rows: int = TABLE_BLOCK_ROWS) -> str:
    """Rows as markdown table(s): the first non-empty row is the header, repeated every
    `block_rows` rows (blocks separated by a blank line). No rows gives ""."""
    table = _trim_rows(rows)
    if not table:
        return ""
    header, body = table[0], table[1:]
    head = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    blocks = []
    for start in range(0, max(len(body), 1), block_rows):
        lines = head + ["| " + " | ".join(row) + " |" for row in body[start : start + block_rows]]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def join_blocks(blocks: Iterable[str]) -> str:
    """Non-empty blocks separated by blank lines."""
    return "\n\n".join(block for block in blocks if block and block.strip())


def unreadable(name: str, kind: str, exc: Exception) -> InvalidArgument:
    """The error for a file its converter library could not open (corrupt, wrong format, ...)."""
    return InvalidArgument(
        f"{name} is not a readable {kind} file: {type(exc).__name__}: {str(exc)[:200]}",
        suggestion=f"Check the file is a complete, uncorrupted {kind} file (re-export or re-download it).",
    )


def no_text(name: str) -> InvalidArgument:
    """The error for a document that opened fine but holds no text."""
    return InvalidArgument(f"{name} has no text content.", suggestion="Skip empty documents.")
