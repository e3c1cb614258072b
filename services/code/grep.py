"""search_type="grep": every line of the chosen sources' files that an RE2 pattern matches, in path then
line order, a page at a time.

The trigram index finds the candidate blocks (services/code/prefilter.py: `text LIKE '%lit%'` for each
literal a match needs), PostgreSQL sorts them by path, and RE2 confirms each line here: first over the
whole block in multi-line mode (one call decides most blocks), then line by line in a block it
matched. A pattern with no usable literal reads every block of the sources instead (`scanned`). Both
stop at a deadline; counting past the page stops at MAX_COUNT matches, after COUNT_BLOCKS more blocks
(deterministic, so the same call counts the same) or, on a starved machine, COUNT_SECONDS (then the total
is a lower bound). Lines come from the line index (services/code/lines.py), paths from the manifests
of git and folder syncs (the `code_paths` view), so a rename is seen at once and identical files each
keep their own path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import asyncpg
import re2

from services.code.lines import segments
from services.code.paths import compile_glob, matches
from services.code.prefilter import Prefilter, like_pattern, prefilter
from services.core.database import Database
from services.core.errors import CallTimeout, InvalidArgument

MAX_PATTERN = 1000
MAX_CONTEXT = 10
MAX_COUNT = 1000  # matches counted past the page at most (then total_matches_at_least)
COUNT_BLOCKS = 128  # candidate blocks read past the page at most (~0.5 MB of lines: ~20 ms)
COUNT_SECONDS = 0.5  # and never longer than this past the page (the page comes first)
DEADLINE_SECONDS = 8.0  # the whole call stops here (a scan of a very large knowledge base)
STATEMENT_MS = 15_000
FETCH = 64  # blocks a cursor round trip brings
RE2_MEMORY = 64 << 20
#: what changes meaning over a whole block (\\A, \\z, a flag turned off): such patterns go line by line
BLOCK_UNSAFE = re2.compile(r"\\[Az]|\(\?[a-zA-Z]*-")


@dataclass(frozen=True)
class GrepRequest:
    pattern: str
    literal: bool = False
    case_sensitive: bool = True
    path: str | None = None
    context_lines: int = 2
    offset: int = 0
    limit: int = 20


@dataclass
class GrepHit:
    """One matching line: where, and the block text around it (filled in for the page only)."""

    source_id: UUID
    document_id: UUID
    path: str
    line: int
    piece: str  # the segment that matched (a long line's piece)
    start: int  # where in `piece` the match starts
    around: list[tuple[int, str]] = field(default_factory=list)  # the lines around it, in order
    commit: str | None = None  # a git source's synced commit
    version: str | None = None  # the source's version label


@dataclass
class GrepOutcome:
    hits: list[GrepHit]
    total: int
    exact: bool  # False: counting stopped (total is a lower bound)
    scanned: bool  # no usable literal: every block of the sources was read
    next_offset: int | None
    prefilter: Prefilter = field(default_factory=Prefilter)


class LineMatcher:
    """The pattern compiled by RE2 for single lines, and for whole blocks when that is equivalent."""

    def __init__(self, pattern: str, literal: bool, case_sensitive: bool) -> None:
        if not pattern or len(pattern) > MAX_PATTERN:
            raise InvalidArgument(
                f"grep needs a pattern of 1 to {MAX_PATTERN} characters.", "Pass query='def send' or a regex."
            )
        options = re2.Options()
        options.case_sensitive = case_sensitive
        options.literal = literal
        options.max_mem = RE2_MEMORY
        options.log_errors = False
        try:
            self.line = re2.compile(pattern, options)
            blockwise = literal or BLOCK_UNSAFE.search(pattern) is None
            self.block = self.line if literal else re2.compile(f"(?m:{pattern})", options) if blockwise else None
        except re2.error as exc:
            raise InvalidArgument(
                f"query is not an RE2 regular expression: {str(exc)[:200]}.",
                "Fix the pattern (RE2 syntax: no backreferences or lookaround), or pass literal=true.",
            ) from None
        self.plain = pattern if literal and case_sensitive else None

    def block_may_match(self, text: str) -> bool:
        if self.plain is not None:
            return self.plain in text
        return self.block is None or self.block.search(text) is not None

    def match_at(self, line: str) -> int:
        """Where the first match in `line` starts; -1 for none."""
        if self.plain is not None:
            return line.find(self.plain)
        found = self.line.search(line)
        return -1 if found is None else found.start()


def check_request(request: GrepRequest) -> None:
    if not 0 <= request.context_lines <= MAX_CONTEXT:
        raise InvalidArgument(
            f"context_lines must be 0 to {MAX_CONTEXT} (got {request.context_lines}).", "Use context_lines=2."
        )
    if request.offset < 0:
        raise InvalidArgument(f"offset must be 0 or more (got {request.offset}).", "Use the next_offset given.")


def candidate_sql(filter_: Prefilter, with_paths: bool, first_arg: int) -> str:
    """Blocks of the sources (and paths) holding every required literal, in path then line order."""
    operator = "ILIKE" if filter_.ignore_case else "LIKE"
    conditions, n = [], first_arg
    for group in filter_.groups:
        alternatives = []
        for _ in group:
            alternatives.append(f"b.text {operator} ${n}")
            n += 1
        conditions.append("(" + " OR ".join(alternatives) + ")")
    paths = "AND p.path = ANY($2::text[]) " if with_paths else ""
    return (
        "SELECT p.path, b.source_id, b.document_id, b.line_start, b.line_end, b.text "
        "FROM code_blocks b JOIN code_paths p ON p.document_id = b.document_id AND p.source_id = b.source_id "
        f"WHERE ($1::uuid[] IS NULL OR b.source_id = ANY($1)) {paths}"
        + "".join(f"AND {c} " for c in conditions)
        + "ORDER BY p.path, b.source_id, b.line_start, b.id"
    )


class CodeSearch:
    """grep over the line index (one per Archivist; the caller narrows `source_ids` to its scope)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def paths_matching(self, source_ids: list[UUID] | None, glob: str) -> list[str]:
        matcher = compile_glob(glob)
        rows = await self.db.pool.fetch(
            "SELECT DISTINCT path FROM code_paths WHERE $1::uuid[] IS NULL OR source_id = ANY($1)", source_ids
        )
        return [r["path"] for r in rows if matches(matcher, r["path"])]

    async def grep(self, request: GrepRequest, source_ids: list[UUID] | None) -> GrepOutcome:
        check_request(request)
        matcher = LineMatcher(request.pattern, request.literal, request.case_sensitive)
        filter_ = prefilter(request.pattern, request.literal, request.case_sensitive)
        args: list[Any] = [source_ids]
        if request.path is not None:
            paths = await self.paths_matching(source_ids, request.path)
            if not paths:
                return GrepOutcome([], 0, True, not filter_.indexed, None, filter_)
            args.append(paths)
        args += [like_pattern(lit) for group in filter_.groups for lit in group]
        sql = candidate_sql(filter_, request.path is not None, len(args) - sum(map(len, filter_.groups)) + 1)
        try:
            return await self._run(sql, args, matcher, request, filter_)
        except asyncpg.QueryCanceledError:
            raise CallTimeout(
                "grep took too long over these sources.",
                "Narrow it: a longer literal in the pattern, a path glob, or fewer sources.",
            ) from None

    async def _run(
        self, sql: str, args: list[Any], matcher: LineMatcher, request: GrepRequest, filter_: Prefilter
    ) -> GrepOutcome:
        hits: list[GrepHit] = []
        total, exact = 0, True
        wanted = request.offset + request.limit
        started = time.monotonic()
        page_full_at: float | None = None
        blocks_past = 0
        last: tuple[str, UUID, int] | None = None
        async with self.db.pool.acquire() as conn, conn.transaction(readonly=True):
            await conn.execute(f"SET LOCAL statement_timeout = {STATEMENT_MS}")
            cursor = conn.cursor(sql, *args, prefetch=FETCH)
            async for row in cursor:
                now = time.monotonic()
                if page_full_at is not None:
                    blocks_past += 1
                    if total >= MAX_COUNT or blocks_past > COUNT_BLOCKS or now - page_full_at > COUNT_SECONDS:
                        exact = False
                        break
                if now - started > DEADLINE_SECONDS:
                    exact = False
                    break
                if not matcher.block_may_match(row["text"]):
                    continue
                for number, piece in segments(row["line_start"], row["line_end"], row["text"]):
                    key = (row["path"], row["source_id"], number)
                    if key == last or (at := matcher.match_at(piece)) < 0:
                        continue
                    last = key  # a long line's pieces (over several blocks) overlap: the line counts once
                    if request.offset <= total < wanted:
                        hits.append(GrepHit(row["source_id"], row["document_id"], row["path"], number, piece, at))
                    total += 1
                if page_full_at is None and total >= wanted:
                    page_full_at = time.monotonic()
        more = total > wanted or not exact
        next_offset = request.offset + len(hits) if more and hits else None
        return GrepOutcome(hits, total, exact, not filter_.indexed, next_offset, filter_)

    async def fill(self, hits: list[GrepHit], context_lines: int) -> None:
        """Give the page's hits the lines around them, and their source's commit and version."""
        if not hits:
            return
        rows = await self.db.pool.fetch(
            "SELECT DISTINCT b.document_id, b.line_start, b.line_end, b.text FROM code_blocks b "
            "JOIN unnest($1::uuid[], $2::int[], $3::int[]) AS w(doc, lo, hi) "
            "ON b.document_id = w.doc AND b.line_end >= w.lo AND b.line_start <= w.hi",
            [h.document_id for h in hits],
            [h.line - context_lines for h in hits],
            [h.line + context_lines for h in hits],
        )
        lines: dict[tuple[UUID, int], str] = {}
        for row in rows:
            for number, piece in segments(row["line_start"], row["line_end"], row["text"]):
                lines.setdefault((row["document_id"], number), piece)  # a long line: its first piece
        for hit in hits:
            span = range(hit.line - context_lines, hit.line + context_lines + 1)
            hit.around = [
                (n, hit.piece if n == hit.line else lines[(hit.document_id, n)])
                for n in span
                if n == hit.line or (hit.document_id, n) in lines
            ]
        sources = await self.db.pool.fetch(
            "SELECT s.id, s.version, g.last_commit FROM sources s LEFT JOIN source_git g ON g.source_id = s.id "
            "WHERE s.id = ANY($1::uuid[])",
            list({h.source_id for h in hits}),
        )
        by_id = {r["id"]: r for r in sources}
        for hit in hits:
            row = by_id.get(hit.source_id)
            if row is not None:
                hit.commit, hit.version = row["last_commit"], row["version"]
