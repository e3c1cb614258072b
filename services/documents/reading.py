"""Reading long documents: outlines (headings with offsets), windows that say where they are,
offsets given as headings, chunk look-up by id, document look-up by URL, and resource listing."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from models import Document
from services.access.scope import current_scope
from services.core.database import Database
from services.core.errors import InvalidArgument, NotFound
from services.core.markdown_lines import atx_heading
from services.core.validation import MAX_PER_PAGE, parse_uuid
from services.documents import DOC_HINT, DOCUMENT_COLUMNS
from services.flags import FLAGS_COLUMN

DEFAULT_WINDOW = 1000
#: a whole document of ordinary length in one call (issue 39: the design asks for at least 50,000)
MAX_WINDOW = 50_000
FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass
class Heading:
    level: int
    text: str
    offset: int
    path: list[str]


def _titled_heading(line: str) -> tuple[int, str] | None:
    """(level, text) of an unindented ATX heading with text (services.core.markdown_lines, linear time)."""
    heading = atx_heading(line, max_indent=0)
    return heading if heading and heading[1] else None


def parse_outline(content: str) -> list[Heading]:
    """Markdown ATX headings outside code fences, each with its offset and heading path."""
    headings: list[Heading] = []
    stack: list[tuple[int, str]] = []
    in_fence = False
    position = 0
    for line in content.splitlines(keepends=True):
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (heading := _titled_heading(line)):
            level, text = heading
            stack = [(lv, t) for lv, t in stack if lv < level] + [(level, text)]
            headings.append(Heading(level, text, position, [t for _, t in stack]))
        position += len(line)
    return headings


def path_at(headings: list[Heading], offset: int) -> list[str]:
    """The heading path in force at `offset` (of the last heading starting at or before it)."""
    current: list[str] = []
    for heading in headings:
        if heading.offset > offset:
            break
        current = heading.path
    return current


def find_heading(headings: list[Heading], wanted: str) -> Heading:
    """A heading by its text or its path ("A > B"), case- and space-insensitive; first match wins."""
    key = " ".join(wanted.lstrip("#").split()).lower()
    for heading in headings:
        if key in (heading.text.lower(), " > ".join(heading.path).lower()):
            return heading
    for heading in headings:  # then a unique-enough prefix
        if heading.text.lower().startswith(key):
            return heading
    raise InvalidArgument(
        f"No heading '{wanted[:100]}' in this document.",
        "Use a heading (or offset) from the document's outline: manage_document(action='get', document_id=...).",
    )


def section_end(headings: list[Heading], start: Heading, total: int) -> int:
    """Where the section opened by `start` ends: the next heading of the same or a higher level."""
    for heading in headings:
        if heading.offset > start.offset and heading.level <= start.level:
            return heading.offset
    return total


def check_max_chars(max_chars: int | None) -> tuple[int, str | None]:
    if max_chars is None:
        return DEFAULT_WINDOW, None
    if max_chars < 1:
        raise InvalidArgument(f"max_chars must be 1 or more (got {max_chars}).", f"Use max_chars up to {MAX_WINDOW:,}.")
    if max_chars > MAX_WINDOW:
        return MAX_WINDOW, f"max_chars {max_chars} was capped at {MAX_WINDOW:,}."
    return max_chars, None


class ReadingService:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def content(self, document_id: UUID) -> str:
        text = await self.db.pool.fetchval("SELECT content FROM documents WHERE id = $1", document_id)
        if text is None:
            raise NotFound(f"Document not found: {document_id}", DOC_HINT)
        return text

    async def window(
        self,
        document_id: UUID,
        offset: int | str | None,
        max_chars: int | None,
        outline_page: int = 1,
        by_section: bool = True,
    ) -> dict[str, Any]:
        """A window of the content (`offset` a number or a heading) plus one page of the outline.
        With `by_section`, a window starting at a heading stops at the end of that heading's section."""
        size, note = check_max_chars(max_chars)
        content = await self.content(document_id)
        headings = parse_outline(content)
        total = len(content)
        start = offset_value(offset, headings)
        if start > total:
            raise InvalidArgument(
                f"offset {start} is past the end of the document ({total} characters).",
                "Use an offset below the document's content_length.",
            )
        end = min(start + size, total)
        opening = next((h for h in headings if h.offset == start), None)
        if opening is not None and by_section:
            end = min(end, section_end(headings, opening, total))
        window: dict[str, Any] = {
            "offset": start,
            "text": content[start:end],
            "next_offset": end if end < total else None,
            "total_length": total,
            "heading_path": path_at(headings, start),
        }
        result: dict[str, Any] = {"content": window, "outline": outline_page_view(headings, outline_page)}
        if note:
            result["note"] = note
        return result

    async def chunk_by_id(self, chunk_id: str | UUID | None) -> dict[str, Any]:
        """A chunk by id; one of a document outside the caller's scope answers exactly like a missing one."""
        cid = parse_uuid(chunk_id, "chunk_id", "Use a chunk_id from search_knowledge_base results.")
        ids = current_scope().source_ids
        row = await self.db.pool.fetchrow(
            "SELECT c.id, c.document_id, c.chunk_index, c.text, c.char_start, c.char_end, c.heading_path, "
            f"c.page_start, c.page_end, {FLAGS_COLUMN}, "
            "(SELECT id FROM chunks p WHERE p.document_id = c.document_id AND p.chunk_index = c.chunk_index - 1) "
            "AS previous_chunk_id, "
            "(SELECT id FROM chunks n WHERE n.document_id = c.document_id AND n.chunk_index = c.chunk_index + 1) "
            "AS next_chunk_id FROM chunks c WHERE c.id = $1 AND ($2::uuid[] IS NULL OR EXISTS "
            "(SELECT 1 FROM documents d WHERE d.id = c.document_id AND d.source_id = ANY($2)))",
            cid,
            None if ids is None else list(ids),
        )
        if row is None:
            raise NotFound(f"Chunk not found: {cid}", "Chunk ids change when a document is updated; search again.")
        return dict(row)

    async def chunk_ids(self, document_id: UUID, limit: int = MAX_PER_PAGE) -> tuple[list[UUID], int]:
        """A document's first `limit` chunk ids in order, and how many chunks it has."""
        rows = await self.db.pool.fetch(
            "SELECT id, count(*) OVER () AS n FROM chunks WHERE document_id = $1 ORDER BY chunk_index LIMIT $2",
            document_id,
            limit,
        )
        return [r["id"] for r in rows], (rows[0]["n"] if rows else 0)

    async def chunk_window(self, chunk: dict[str, Any], length: int = DEFAULT_WINDOW) -> dict[str, Any]:
        """The text around a chunk that holds any search result's window focused in it: a result shows
        at most `length` characters centred on a match inside the chunk (moved inside its passage), so
        half that length either side of the chunk, and at least `length` from its start or to its end."""
        content = await self.content(chunk["document_id"])
        start = max(0, min(chunk["char_start"] - length // 2, chunk["char_end"] - length))
        end = min(len(content), max(chunk["char_end"] + length // 2, chunk["char_start"] + length))
        headings = parse_outline(content)
        return {
            "offset": start,
            "text": content[start:end],
            "next_offset": end if end < len(content) else None,
            "total_length": len(content),
            "heading_path": path_at(headings, start),
        }

    async def document_by_url(self, url: str, source_id: UUID | None) -> Document:
        """The document at `url` among the caller's sources (others are not looked at, so neither the
        answer nor the 'several sources' refusal tells anything about them)."""
        ids = current_scope().source_ids
        rows = await self.db.pool.fetch(
            f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE url = $1 AND ($2::uuid IS NULL OR source_id = $2) "
            "AND ($3::uuid[] IS NULL OR source_id = ANY($3)) ORDER BY updated_at DESC LIMIT 2",
            url,
            source_id,
            None if ids is None else list(ids),
        )
        if not rows:
            raise NotFound(f"No document with url {url[:200]}", DOC_HINT)
        if len(rows) > 1:
            raise InvalidArgument(
                f"Several sources hold a document with url {url[:200]}.", "Pass source_id to pick one."
            )
        return Document(**dict(rows[0]))

    async def list_resources(self, offset: int, limit: int = MAX_PER_PAGE) -> tuple[list[dict[str, Any]], bool]:
        """Sources then documents in the caller's scope, oldest first; one page and whether more follow."""
        ids = current_scope().source_ids
        rows = await self.db.pool.fetch(
            "SELECT kind, id, title, url FROM ("
            "SELECT 0 AS kind, id, title, url, created_at FROM sources WHERE $3::uuid[] IS NULL OR id = ANY($3) "
            "UNION ALL SELECT 1, id, title, url, created_at FROM documents "
            "WHERE $3::uuid[] IS NULL OR source_id = ANY($3)) r ORDER BY kind, created_at, id "
            "OFFSET $1 LIMIT $2",
            offset,
            limit + 1,
            None if ids is None else list(ids),
        )
        items = [{**dict(r), "kind": "source" if r["kind"] == 0 else "document"} for r in rows[:limit]]
        return items, len(rows) > limit


def offset_value(offset: int | str | None, headings: list[Heading]) -> int:
    if offset is None or offset == "":
        return 0
    if isinstance(offset, str) and offset.strip().lstrip("-").isdigit():
        offset = int(offset.strip())
    if isinstance(offset, str):
        return find_heading(headings, offset).offset
    if offset < 0:
        raise InvalidArgument(f"offset must be 0 or more (got {offset}).", "Use offset=0 to read from the start.")
    return offset


def outline_page_view(headings: list[Heading], page: int) -> dict[str, Any]:
    if page < 1:
        raise InvalidArgument(f"page must be 1 or more (got {page}).", "Use page=1 for the first outline page.")
    chosen = headings[(page - 1) * MAX_PER_PAGE : page * MAX_PER_PAGE]
    return {
        "headings": [{"heading": h.text, "level": h.level, "offset": h.offset} for h in chosen],
        "total_count": len(headings),
        "page": page,
        "has_more": page * MAX_PER_PAGE < len(headings),
    }
