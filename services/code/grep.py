"""search_type="grep": every line of the chosen sources' files that an RE2 pattern matches, in path then
line order, a page at a time.

The files come first, in path order (the `code_paths` view: the manifests of git and folder syncs, so
a rename is seen at once and identical files each keep their own path). Then the blocks of the line
index (services/code/lines.py) are read in that order, a window of files at a time, each window's
query keeping only blocks that hold every literal a match needs (services/code/prefilter.py: `text
LIKE '%lit%'`, which pg_trgm answers from its GIN index); RE2 confirms the lines here
(services/code/matcher.py). Reading stops once the page is full and the count past it has read
COUNT_BLOCKS more candidate blocks (or, on a starved machine, COUNT_SECONDS): a common pattern never
reads every candidate for page one, and its total is then a lower bound (`total_matches_at_least`).

A probe asks the index first for up to PROBE candidate blocks: when there are no more than that (a
rare pattern), they are every block to read, in hand at once, and all of them are counted (exactly,
unless COUNT_SECONDS runs out). A pattern with no usable literal reads every block, in the same order
and under the same budgets (`scanned`).
Every read of one call sees one snapshot (a repeatable-read transaction), so pages stay consistent.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import asyncpg

from services.code.lines import segments
from services.code.matcher import LineMatcher
from services.code.paths import compile_glob, matches
from services.code.prefilter import Prefilter, like_pattern, prefilter
from services.core.database import Database
from services.core.errors import CallTimeout, InvalidArgument

MAX_CONTEXT = 10
PROBE = 128  # candidate blocks the probe asks for: no more than this, and the walk reads just those
COUNT_BLOCKS = 64  # candidate blocks read past the page at most (~0.25 MB of lines), then a lower bound
COUNT_SECONDS = 0.25  # and never longer than this past the page (the page comes first)
DEADLINE_SECONDS = 8.0  # the whole call stops here (a scan of a very large knowledge base)
STATEMENT_MS = 15_000
#: every statement planned for its own literals (a cached generic plan cannot use the trigram index for
#: `LIKE $n`: the windows took 5-10x longer once asyncpg's prepared statements went generic), and no
#: sequential scan (the probe's LIMIT tempts the planner to one, which reads every block for a rare
#: literal; the windows go by document)
PLANNER = "SET LOCAL plan_cache_mode = force_custom_plan; SET LOCAL enable_seqscan = off"
FIRST_WINDOW = 8  # files the first window reads; later ones are sized by what the earlier ones held
MAX_WINDOW = 512


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


@dataclass(frozen=True)
class FileRef:
    """A file of the chosen sources, as its sync manifest names it."""

    path: str
    source_id: UUID
    document_id: UUID


@dataclass
class Tally:
    """What a walk has found so far, and what it has read."""

    wanted: int  # offset + limit: the hits page one to this page hold
    offset: int
    bounded: bool = True  # False: every candidate block is in hand (the probe's), all are counted
    hits: list[GrepHit] = field(default_factory=list)
    total: int = 0
    files_read: int = 0
    blocks_read: int = 0  # candidate blocks
    blocks_past: int = 0  # candidate blocks read once the page was full
    page_full_at: float | None = None
    last: tuple[str, UUID, int] | None = None  # the last line counted (a long line counts once)

    def next_window(self, remaining: int) -> int:
        """How many files the next window reads: enough, by the rate so far, to fill the page (or the
        count budget), and never more than twice the files read yet (the rate may be off)."""
        grow = max(FIRST_WINDOW, 2 * self.files_read)
        if self.page_full_at is None and self.total:
            grow = min(grow, math.ceil((self.wanted - self.total) * self.files_read / self.total * 1.5))
        elif self.page_full_at is not None and self.blocks_read:
            rate = self.blocks_read / max(self.files_read, 1)
            grow = min(grow, math.ceil((COUNT_BLOCKS - self.blocks_past + 1) / rate * 1.2))
        return max(1, min(remaining, MAX_WINDOW, grow))


def check_request(request: GrepRequest) -> None:
    if not 0 <= request.context_lines <= MAX_CONTEXT:
        raise InvalidArgument(
            f"context_lines must be 0 to {MAX_CONTEXT} (got {request.context_lines}).", "Use context_lines=2."
        )
    if request.offset < 0:
        raise InvalidArgument(f"offset must be 0 or more (got {request.offset}).", "Use the next_offset given.")


def likes_sql(filter_: Prefilter, first_arg: int) -> str:
    """`AND (b.text LIKE $n OR ...)` for each literal group the prefilter requires ('' for none)."""
    operator = "ILIKE" if filter_.ignore_case else "LIKE"
    conditions, n = [], first_arg
    for group in filter_.groups:
        alternatives = []
        for _ in group:
            alternatives.append(f"b.text {operator} ${n}")
            n += 1
        conditions.append("(" + " OR ".join(alternatives) + ")")
    return "".join(f" AND {c}" for c in conditions)


FILES_SQL = (
    "SELECT path, source_id, document_id FROM code_paths WHERE $1::uuid[] IS NULL OR source_id = ANY($1) "
    "ORDER BY path, source_id"
)
BLOCK_COLUMNS = "b.document_id, b.id, b.line_start, b.line_end, b.text"
PROBE_SQL = (
    f"SELECT {BLOCK_COLUMNS} FROM code_blocks b WHERE ($1::uuid[] IS NULL OR b.source_id = ANY($1)){{likes}} LIMIT $2"
)
#: the window's blocks by document, the literals checked on those only (OFFSET 0 keeps the LIKEs out of
#: the scan: for a common literal the planner would rather recheck every candidate of the table, ~3,800
#: blocks for `return None`, in each window)
WINDOW_SQL = (
    f"SELECT * FROM (SELECT {BLOCK_COLUMNS} FROM code_blocks b WHERE b.document_id = ANY($1::uuid[]) OFFSET 0) b "
    "WHERE true{likes}"
)


class CodeSearch:
    """grep over the line index (one per Archivist; the caller narrows `source_ids` to its scope)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def grep(self, request: GrepRequest, source_ids: list[UUID] | None) -> GrepOutcome:
        check_request(request)
        matcher = LineMatcher(request.pattern, request.literal, request.case_sensitive)
        filter_ = prefilter(request.pattern, request.literal, request.case_sensitive)
        glob = compile_glob(request.path) if request.path is not None else None
        likes = [like_pattern(lit) for group in filter_.groups for lit in group]
        try:
            async with self.db.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
                await conn.execute(f"SET LOCAL statement_timeout = {STATEMENT_MS}; {PLANNER}")
                files = [
                    FileRef(r["path"], r["source_id"], r["document_id"])
                    for r in await conn.fetch(FILES_SQL, source_ids)
                    if glob is None or matches(glob, r["path"])
                ]
                found: list[Any] | None = None  # every candidate block, when the probe found them all
                if files and filter_.indexed:
                    probe = PROBE_SQL.format(likes=likes_sql(filter_, 3))
                    found = await conn.fetch(probe, source_ids, PROBE + 1, *likes)
                    if len(found) <= PROBE:
                        candidates = {r["document_id"] for r in found}
                        files = [f for f in files if f.document_id in candidates]
                    else:
                        found = None
                tally = Tally(request.offset + request.limit, request.offset, bounded=found is None)
                exact = await self._walk(conn, files, found, filter_, likes, matcher, tally)
        except asyncpg.QueryCanceledError:
            raise CallTimeout(
                "grep took too long over these sources.",
                "Narrow it: a longer literal in the pattern, a path glob, or fewer sources.",
            ) from None
        more = tally.total > tally.wanted or not exact
        next_offset = request.offset + len(tally.hits) if more and tally.hits else None
        return GrepOutcome(tally.hits, tally.total, exact, not filter_.indexed, next_offset, filter_)

    async def _walk(
        self,
        conn: asyncpg.Connection,
        files: list[FileRef],
        found: list[Any] | None,
        filter_: Prefilter,
        likes: list[str],
        matcher: LineMatcher,
        tally: Tally,
    ) -> bool:
        """Read the files' candidate blocks in path order, a window at a time, until the page is full
        and the count budget spent; True when every file was read (the total is exact). `found`: the
        probe's blocks, every candidate there is (one window of all the files)."""
        sql = WINDOW_SQL.format(likes=likes_sql(filter_, 2))
        started = time.monotonic()
        i = 0
        while i < len(files):
            if time.monotonic() - started > DEADLINE_SECONDS:
                return False
            window = files[i : i + (len(files) if found is not None else tally.next_window(len(files) - i))]
            rows = found if found is not None else await conn.fetch(sql, list({f.document_id for f in window}), *likes)
            blocks: dict[UUID, list[Any]] = {}
            for row in sorted(rows, key=lambda r: (r["line_start"], r["id"])):
                blocks.setdefault(row["document_id"], []).append(row)
            for file in window:
                for row in blocks.get(file.document_id, ()):
                    if not self._count_block(file, row, matcher, tally, started):
                        return False
                tally.files_read += 1
                i += 1
        return True

    def _count_block(self, file: FileRef, row: Any, matcher: LineMatcher, tally: Tally, started: float) -> bool:
        """Count one candidate block's matching lines (keeping the page's); False once a budget is spent."""
        now = time.monotonic()
        if now - started > DEADLINE_SECONDS:
            return False
        if tally.page_full_at is not None:
            tally.blocks_past += 1
            if (tally.bounded and tally.blocks_past > COUNT_BLOCKS) or now - tally.page_full_at > COUNT_SECONDS:
                return False
        tally.blocks_read += 1
        for found in matcher.lines(row["line_start"], row["line_end"], row["text"]):
            key = (file.path, file.source_id, found.number)
            if key == tally.last:
                continue  # a long line's pieces (over several blocks) overlap: the line counts once
            tally.last = key
            if tally.offset <= tally.total < tally.wanted:
                piece, at = found.line()
                tally.hits.append(GrepHit(file.source_id, file.document_id, file.path, found.number, piece, at))
            tally.total += 1
        if tally.page_full_at is None and tally.total >= tally.wanted:
            tally.page_full_at = time.monotonic()
        return True

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
