"""Writing the symbol table (sql/038_code_symbols.sql): one call from ingest, in its transaction.

`write_symbols` replaces a document's rows with what its text holds now: for a code file (metadata
`language` with tag queries) its definitions (arrays in its code_symbol_files row, sql/060) and
references (services/code/symbols.py); a document of any other kind keeps no rows. `write_documented`
records the names an API reference page documents (services/pages/api_names.py), rows of code_symbols,
which the crawl writes beside the page's links. Deleting a document
drops its rows (ON DELETE CASCADE); a renamed file keeps them (paths come from the sync manifests).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg

from services.code.symbols import Definition, Symbols, extract, supports

SYMBOL_COLUMNS = (
    "source_id", "document_id", "name", "kind", "qualified_name", "parent", "line_start", "line_end", "signature",
    "doc", "anchor", "char_start",
)  # fmt: skip
REFERENCE_COLUMNS = ("source_id", "document_id", "names", "ends", "lines")
QUALIFIED_COLUMNS = ("source_id", "document_id", "names", "qualifiers", "ends", "lines")
FILE_COLUMNS = (
    "source_id", "document_id", "language", "definitions", "references", "capped", "qualified",
    "names", "kinds", "parents", "qualified_names", "line_starts", "line_ends", "signatures", "docs",
)  # fmt: skip
TABLES = ("code_symbols", "code_references", "code_qualified_references", "code_symbol_files")


def file_symbols(content: str, metadata: dict[str, Any] | None) -> Symbols | None:
    """The symbols of a code document, None for any other."""
    metadata = metadata or {}
    language = metadata.get("language")
    if not supports(language):
        return None
    path = metadata.get("path")
    return extract(content, str(language), path if isinstance(path, str) else None)


async def write_symbols(
    conn: asyncpg.Connection,
    document_id: UUID,
    source_id: UUID,
    content: str,
    metadata: dict[str, Any] | None,
    fresh: bool = False,
) -> None:
    """Replace the document's symbol rows (in the caller's transaction). `fresh`: the document was
    inserted by this transaction (no rows to delete)."""
    if not fresh:
        await delete_symbols(conn, document_id)
    symbols = file_symbols(content, metadata)
    if symbols is not None:
        await write_extracted(conn, document_id, source_id, symbols)


async def delete_symbols(conn: asyncpg.Connection, document_id: UUID) -> None:
    """Drop the document's rows from every symbol table."""
    for table in TABLES:
        await conn.execute(f"DELETE FROM {table} WHERE document_id = $1", document_id)  # noqa: S608 (a constant)


async def write_extracted(conn: asyncpg.Connection, document_id: UUID, source_id: UUID, symbols: Symbols) -> None:
    """Write a code file's extracted symbols (its rows deleted first, or never written)."""
    # every name of a qualified use is a reference name (sql/061: qualified uses are found through the
    # references' names index); both come from the same identifiers, so this adds none in practice
    references = symbols.references | {name: [] for name, _ in symbols.qualified if name not in symbols.references}
    if references:
        ends, lines = packed(list(references.values()))
        row = (source_id, document_id, list(references), ends, lines)
        await conn.copy_records_to_table("code_references", records=[row], columns=REFERENCE_COLUMNS)
    if symbols.qualified:
        ends, lines = packed(list(symbols.qualified.values()))
        names, qualifiers = (list(column) for column in zip(*symbols.qualified, strict=True))
        uses_row = (source_id, document_id, names, qualifiers, ends, lines)
        await conn.copy_records_to_table("code_qualified_references", records=[uses_row], columns=QUALIFIED_COLUMNS)
    counted = sum(len(lines) for lines in symbols.references.values())
    uses = sum(len(lines) for lines in symbols.qualified.values())
    summary = (source_id, document_id, symbols.language, len(symbols.definitions), counted, symbols.capped, uses)
    record = (*summary, *definition_arrays(symbols.definitions))
    await conn.copy_records_to_table("code_symbol_files", records=[record], columns=FILE_COLUMNS)


def definition_arrays(definitions: list[Definition]) -> tuple[list[Any] | None, ...]:
    """A file's definitions as its code_symbol_files row holds them (sql/060): one array per field, in file
    order (all None without definitions); qualified names as stored_qualified gives them, the array None
    when none is stored."""
    if not definitions:
        return (None,) * 8
    stored = [stored_qualified(d.name, d.parent, d.qualified_name) for d in definitions]
    return (
        [d.name for d in definitions],
        [d.kind for d in definitions],
        [d.parent for d in definitions],
        stored if any(q is not None for q in stored) else None,
        [d.line_start for d in definitions],
        [d.line_end for d in definitions],
        [d.signature for d in definitions],
        [d.doc for d in definitions],
    )


def stored_qualified(name: str, parent: str | None, qualified: str) -> str | None:
    """A qualified name as stored (sql/055): NULL when the parent and name spell it, as
    code_qualified_name reads it back."""
    return None if qualified == (f"{parent}.{name}" if parent is not None else name) else qualified


def packed(groups: list[list[int]]) -> tuple[list[int], list[int]]:
    """A file's line lists as one row's arrays (sql/049): where each list ends in the joined lines, and
    the joined lines."""
    ends: list[int] = []
    lines: list[int] = []
    for group in groups:
        lines.extend(group)
        ends.append(len(lines))
    return ends, lines


async def write_documented(conn: asyncpg.Connection, document_id: UUID, source_id: UUID, documented: Any) -> None:
    """Replace the names a page documents: [qualified name, anchor, kind, offset of the entry in the page's
    text or None] each (services/pages/api_places.py; entries of three, from before offsets, have none)."""
    await conn.execute("DELETE FROM code_symbols WHERE document_id = $1 AND anchor IS NOT NULL", document_id)
    if not isinstance(documented, list):
        return
    rows = []
    for entry in documented:
        if not isinstance(entry, list | tuple) or len(entry) not in (3, 4):
            continue
        if not all(isinstance(v, str) for v in entry[:3]):
            continue
        qualified, anchor, kind = entry[:3]
        offset = entry[3] if len(entry) == 4 and isinstance(entry[3], int) and entry[3] >= 0 else None
        name = qualified.replace("::", ".").rsplit(".", 1)[-1]
        if name:
            stored = stored_qualified(name, None, qualified)
            rows.append((source_id, document_id, name, kind, stored, None, None, None, "", "", anchor, offset))
    if rows:
        await conn.copy_records_to_table("code_symbols", records=rows, columns=SYMBOL_COLUMNS)
