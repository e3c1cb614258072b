"""A source's files by path: lines of one file (numbered, a window at a time) and the files under a
directory, from the line index and the sync manifests (the `code_paths` view, sql/037). The caller
checks the source is in its scope first (SourceService.get)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from services.code.lines import segments
from services.core.database import Database
from services.core.errors import InvalidArgument, NotFound
from services.core.validation import MAX_PER_PAGE

MAX_LINES = 200  # lines one read returns at most
MAX_CHARS = 4000  # and characters (the usual window of manage_document get)
DEFAULT_LINES = 100
LONG_LINE = 1000  # a longer line is shown cut (its first characters)


@dataclass
class FileLines:
    source_id: UUID
    document_id: UUID
    path: str
    line_start: int
    line_end: int
    total_lines: int
    lines: list[tuple[int, str]] = field(default_factory=list)
    cut_lines: int = 0  # lines shown cut at LONG_LINE characters
    commit: str | None = None
    version: str | None = None


@dataclass
class FileList:
    files: list[dict[str, Any]]
    total: int
    page: int
    per_page: int


def directory_prefix(path: str) -> str:
    """'' for the whole source, else the directory with one trailing slash ('a/b/')."""
    cleaned = path.strip().strip("/")
    return f"{cleaned}/" if cleaned and cleaned != "." else ""


class CodeFiles:
    """Reading a source's files by path and line."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def document_at(self, source_id: UUID, path: str) -> UUID:
        document_id = await self.db.pool.fetchval(
            "SELECT document_id FROM code_paths WHERE source_id = $1 AND path = $2 LIMIT 1", source_id, path.strip("/")
        )
        if document_id is None:
            raise NotFound(
                f"No file '{path[:200]}' in this source.",
                "List its files with manage_document(action='list', source_id=..., path='dir/').",
            )
        return UUID(str(document_id))

    async def read(self, source_id: UUID, path: str, line_start: int | None, line_end: int | None) -> FileLines:
        """Lines line_start..line_end of the file at `path` (1-based, inclusive; at most MAX_LINES lines
        and MAX_CHARS characters), as the last sync stored it."""
        first = 1 if line_start is None else line_start
        last = first + DEFAULT_LINES - 1 if line_end is None else line_end
        if first < 1 or last < first:
            raise InvalidArgument(
                f"line_start {first} and line_end {last} do not make a range.", "Use line_start=1, line_end=50."
            )
        last = min(last, first + MAX_LINES - 1)
        document_id = await self.document_at(source_id, path)
        total = await self.db.pool.fetchval("SELECT max(line_end) FROM code_blocks WHERE document_id = $1", document_id)
        if total is None:
            raise NotFound(
                f"'{path[:200]}' is not a text or code file with lines (it was stored as a document).",
                "Read it with manage_document(action='get', document_id=...).",
            )
        rows = await self.db.pool.fetch(
            "SELECT line_start, line_end, text FROM code_blocks WHERE document_id = $1 AND line_end >= $2 "
            "AND line_start <= $3 ORDER BY line_start, id",
            document_id,
            first,
            last,
        )
        result = FileLines(source_id, document_id, path.strip("/"), first, first - 1, int(total))
        size, seen = 0, set()
        for row in rows:
            for number, text in segments(row["line_start"], row["line_end"], row["text"]):
                if number in seen or not first <= number <= last:
                    continue
                seen.add(number)
                if len(text) > LONG_LINE or row["line_start"] == row["line_end"] and len(row["text"]) > LONG_LINE:
                    text, result.cut_lines = text[:LONG_LINE], result.cut_lines + 1
                if result.lines and size + len(text) + 1 > MAX_CHARS:
                    break
                size += len(text) + 1
                result.lines.append((number, text))
                result.line_end = number
        await self._stamp(result)
        return result

    async def _stamp(self, result: FileLines) -> None:
        row = await self.db.pool.fetchrow(
            "SELECT s.version, g.last_commit FROM sources s LEFT JOIN source_git g ON g.source_id = s.id "
            "WHERE s.id = $1",
            result.source_id,
        )
        if row is not None:
            result.commit, result.version = row["last_commit"], row["version"]

    async def list(self, source_id: UUID, path: str, page: int, per_page: int) -> FileList:
        """The files under directory `path` of the source (all of them for '' or '/'), by path."""
        if page < 1 or not 1 <= per_page <= MAX_PER_PAGE:
            raise InvalidArgument(f"page >= 1 and per_page 1 to {MAX_PER_PAGE}.", "Use page=1, per_page=20.")
        prefix = directory_prefix(path)
        like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = await self.db.pool.fetch(
            "SELECT p.path, p.document_id, (SELECT max(line_end) FROM code_blocks b "
            "WHERE b.document_id = p.document_id) AS lines, count(*) OVER () AS total "
            "FROM code_paths p WHERE p.source_id = $1 AND p.path LIKE $2 ORDER BY p.path LIMIT $3 OFFSET $4",
            source_id,
            like,
            per_page,
            (page - 1) * per_page,
        )
        files = [
            {"path": r["path"], "document_id": str(r["document_id"]), **({"lines": r["lines"]} if r["lines"] else {})}
            for r in rows
        ]
        total = int(rows[0]["total"]) if rows else await self._count(source_id, like)
        return FileList(files, total, page, per_page)

    async def _count(self, source_id: UUID, like: str) -> int:
        return int(
            await self.db.pool.fetchval(
                "SELECT count(*) FROM code_paths WHERE source_id = $1 AND path LIKE $2", source_id, like
            )
        )
