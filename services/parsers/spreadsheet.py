"""Spreadsheets to markdown tables: Excel workbooks (.xlsx/.xlsm, openpyxl) and CSV/TSV (csv module).

Each sheet of a workbook becomes a `# Sheet name` section. Long tables are written in blocks of
TABLE_BLOCK_ROWS rows that repeat the header row, so every chunk carries its column names.
"""

from __future__ import annotations

import csv
import io
import logging
from pathlib import Path

from services.core.budgets import budget
from services.parsers.base import DocumentParser, ParsedDocument
from services.parsers.markup import heading, join_blocks, markdown_table, no_text, one_line, unreadable
from services.parsers.text import decode_text

logger = logging.getLogger(__name__)

#: Cells read from one workbook at most (a guard against huge sparse sheets).
MAX_CELLS = budget("spreadsheet").structure


class XlsxParser(DocumentParser):
    """Excel workbooks (.xlsx, .xlsm): every non-empty sheet as a headed markdown table (cell values,
    not formulas)."""

    extensions = (".xlsx", ".xlsm")

    def parse(self, data: bytes, path: Path | None = None) -> ParsedDocument:
        """One `# sheet` section per sheet with data; the title is the workbook's title property."""
        import openpyxl

        name = path.name if path is not None else "workbook"
        try:
            workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        except Exception as exc:  # bad zip, not a workbook, ...
            raise unreadable(name, "Excel (.xlsx)", exc) from exc
        try:
            blocks, cells = [], 0
            for sheet in workbook.worksheets:
                rows = []
                for row in sheet.iter_rows(values_only=True):
                    cells += len(row)
                    if cells > MAX_CELLS:
                        raise unreadable(name, "Excel (.xlsx)", ValueError(f"more than {MAX_CELLS} cells"))
                    rows.append(row)
                table = markdown_table(rows)
                if table:
                    blocks.append(join_blocks([heading(1, sheet.title), table]))
            title = one_line(workbook.properties.title or "") if workbook.properties else ""
        finally:
            workbook.close()
        content = join_blocks(blocks)
        if not content:
            raise no_text(name)
        return ParsedDocument(content=content, title=title or None, document_type="xlsx", metadata={})


class CsvParser(DocumentParser):
    """CSV and TSV files as markdown tables (first row = header)."""

    extensions = (".csv", ".tsv")

    def parse(self, data: bytes, path: Path | None = None) -> ParsedDocument:
        """Split by comma (.csv; semicolon when the header has more of those) or tab (.tsv)."""
        name = path.name if path is not None else "table"
        text = decode_text(data)
        suffix = path.suffix.lower() if path is not None else ".csv"
        first_line = text.split("\n", 1)[0]
        delimiter = "\t" if suffix == ".tsv" else (";" if first_line.count(";") > first_line.count(",") else ",")
        limits, rows = budget("csv"), []
        cells = limits.meter()
        try:
            for row in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter):
                cells.tick(max(len(row), 1))
                rows.append(row)
        except csv.Error as exc:  # e.g. a field over the size limit
            raise unreadable(name, suffix.lstrip(".").upper(), exc) from exc
        content = markdown_table(rows)
        if not content:
            raise no_text(name)
        return ParsedDocument(content=content, title=None, document_type="csv", metadata={"format": suffix[1:]})
