"""search_type="grep": every line of the chosen sources' files that an RE2 pattern matches, in path then
line order, a page at a time.

Files are named by the `code_paths` view (the manifests of git and folder syncs, so a rename is seen at
once and identical files each keep their own path). The literals every match needs
(services/code/prefilter.py) become trigram arrays (pg_trgm's `show_trgm`: the trigrams of their words,
those grep asks for: `code_trigrams`), and one query reads every candidate block from the index of the
blocks' trigram arrays (sql/046, sql/061) — a
block holding every trigram of a literal — without reading any block's text, joined to its paths and
sorted in path then line order there. The candidates are then read in that order, a batch at a time
(PostgreSQL dropping the blocks without a case-sensitive pattern's required literals, by LIKE), and RE2
confirms the lines here
(services/code/matcher.py). Reading stops once the page is full and the count past it has read
COUNT_BLOCKS more candidate blocks (or, on a starved machine, COUNT_SECONDS): a common pattern never
reads every candidate for page one, and its total is then a lower bound (`total_matches_at_least`).
When there are no more than PROBE candidates (a rare pattern), the same query returns their text, and
all of them are counted (exactly, unless COUNT_SECONDS runs out). A pattern with no usable literal
reads every block, a window of files at a time, in the same order and under the same budgets
(`scanned`). Every read of one call sees one snapshot (a repeatable-read transaction), so pages stay
consistent and a candidate's ctid names the same row until the call ends.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import asyncpg

from services.code.candidates import Candidates, FileRef, paired
from services.code.lines import segments
from services.code.matcher import LineMatcher
from services.code.paths import compile_glob, matches
from services.code.prefilter import Prefilter, like_pattern, prefilter
from services.core.database import Database
from services.core.errors import CallTimeout, InvalidArgument

MAX_CONTEXT = 10
PROBE = 128  # candidate blocks read with the candidates, and all counted, when there are no more
COUNT_BLOCKS = 64  # candidate blocks read past the page at most (~0.25 MB of lines), then a lower bound
COUNT_SECONDS = 0.25  # and never longer than this past the page (the page comes first)
DEADLINE_SECONDS = 8.0  # the whole call stops here (a scan of a very large knowledge base)
STATEMENT_MS = 15_000
#: every statement planned for its own arrays (asyncpg's prepared statements would go generic), and no
#: sequential scan: the candidates come from the trigram arrays' index, and batches are read by ctid. No
#: memoized nested loop either: the planner guesses a common pattern's candidates ~5x too few (its
#: trigrams are counted as independent), and a memoized lookup of each candidate's paths (~9 us a
#: document) then looks cheaper than hashing the scope's paths; it was half the candidates query
#: (`^import os$` over the stdlib: 22 -> 14 ms). Without it a rare pattern still gets a plain nested loop.
PLANNER = (
    "SET LOCAL plan_cache_mode = force_custom_plan; SET LOCAL enable_seqscan = off; SET LOCAL enable_memoize = off"
)
FIRST_WINDOW = 8  # files the first window reads; later ones are sized by what the earlier ones held
MAX_WINDOW = 512
MAX_REMEMBERED = 4096  # literals whose trigrams are kept
TRIGRAMS: dict[str, frozenset[str]] = {}
FIRST_BATCH = 32  # candidate blocks the first batch reads; later ones are sized by what the earlier ones held
MAX_BATCH = 1024
HASH_RATIO = 8  # the candidates' paths are hashed when candidates x this > the files that can be in scope


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

    def next_batch(self, remaining: int) -> int:
        """How many candidate blocks the next batch reads: all of them when they are few (every one is
        counted), else enough by the rate so far to fill the page (or the count budget), never more
        than twice the blocks read yet."""
        if not self.bounded:
            return remaining
        grow = max(FIRST_BATCH, 2 * self.blocks_read)
        if self.page_full_at is None and self.total:
            grow = min(grow, math.ceil((self.wanted - self.total) * self.blocks_read / self.total * 1.5))
        elif self.page_full_at is not None:
            grow = min(grow, COUNT_BLOCKS - self.blocks_past + 1)
        return max(1, min(remaining, MAX_BATCH, grow))


def check_request(request: GrepRequest) -> None:
    if not 0 <= request.context_lines <= MAX_CONTEXT:
        raise InvalidArgument(
            f"context_lines must be 0 to {MAX_CONTEXT} (got {request.context_lines}).", "Use context_lines=2."
        )
    if request.offset < 0:
        raise InvalidArgument(f"offset must be 0 or more (got {request.offset}).", "Use the next_offset given.")


#: the trigrams of each literal that every block holding it has too (pg_trgm's words, lowercased), through
#: the function the blocks' index is over (sql/061): a trigram padded at a word's edge (" ab", "ab ") is
#: left out, as the literal's edge may sit inside a longer word of the line; a hashed multibyte trigram
#: ("0x...") is left out, it may hide such padding
TRIGRAMS_SQL = "SELECT code_trigrams(l.literal) FROM unnest($1::text[]) WITH ORDINALITY AS l(literal, n) ORDER BY l.n"
FILES_SQL = (
    "SELECT path, source_id, document_id FROM code_paths WHERE $1::uuid[] IS NULL OR source_id = ANY($1) "
    "ORDER BY path, source_id"
)
BLOCK_COLUMNS = "b.document_id, b.id, b.line_start, b.line_end, b.text"
#: every candidate block, read from the trigram arrays' index alone (sql/046: no block is detoasted), with
#: each path its document has, in path then line order (sorting here, not in Python, is what kept a
#: common pattern's page one CPU-bound in the client), and the blocks' text when they are no more than
#: PROBE (a rare pattern: one query reads all it needs). The paths are joined one of two ways, chosen
#: when the candidates are counted (the planner cannot: it guesses a common pattern's candidates ~5x
#: too few, its trigrams counted as independent): few candidates look their paths up by document (~5 us
#: each), many hash the scope's paths (~0.5 us a file; the catalog's row counts bound the scope), which
#: halved the candidates query of `raise ValueError` over the stdlib (16 -> 10 ms)
CANDIDATES_SQL = (
    "WITH c AS MATERIALIZED (SELECT b.ctid, b.document_id, b.id, b.line_start, b.line_end FROM code_blocks b "
    "WHERE ($1::uuid[] IS NULL OR b.source_id = ANY($1)){words}), "
    f"h AS MATERIALIZED (SELECT (SELECT count(*) FROM c) * {HASH_RATIO} > (SELECT sum(reltuples) FROM pg_class "
    "WHERE oid IN ('git_files'::regclass, 'folder_files'::regclass)) AS hashed), "
    "s AS MATERIALIZED (SELECT p.path, p.source_id, p.document_id FROM code_paths p "
    "WHERE $1::uuid[] IS NULL OR p.source_id = ANY($1)), "
    "o AS MATERIALIZED (SELECT p.path, p.source_id, c.* FROM c JOIN code_paths p ON p.document_id = c.document_id "
    "WHERE ($1::uuid[] IS NULL OR p.source_id = ANY($1)) AND NOT (SELECT hashed FROM h) "
    "UNION ALL SELECT s.path, s.source_id, c.* FROM c JOIN s ON s.document_id = c.document_id "
    "WHERE (SELECT hashed FROM h)) "
    f"SELECT o.path, o.source_id, o.document_id, o.ctid, o.line_start, o.line_end, CASE WHEN (SELECT count(*) FROM o) "
    f"<= {PROBE} THEN (SELECT t.text FROM code_blocks t WHERE t.ctid = o.ctid) END AS text, "
    "(SELECT count(*) FROM o) AS n FROM o ORDER BY o.path, o.source_id, o.line_start, o.id"
)
BY_CTID_SQL = f"SELECT b.ctid, {BLOCK_COLUMNS} FROM code_blocks b WHERE b.ctid = ANY($1::tid[])"
#: a block that holds no required literal of a group holds no matching line: PostgreSQL drops it, and its
#: text never travels here (a common pattern's trigrams are in many more blocks than its literals)
HOLDS_SQL = " AND ({})"
BY_DOCUMENT_SQL = f"SELECT {BLOCK_COLUMNS} FROM code_blocks b WHERE b.document_id = ANY($1::uuid[])"


def literals_sql(filter_: Prefilter) -> tuple[str, list[str]]:
    """`AND ((b.text LIKE $2 OR ...) AND ...)`, and its LIKE patterns: every group of required literals
    of a case-sensitive pattern ("" and [] without case: ILIKE's folding is not RE2's)."""
    if filter_.ignore_case or not filter_.groups:
        return "", []
    patterns: list[str] = []
    clauses = []
    for group in filter_.groups:
        either = []
        for literal in group:
            patterns.append(like_pattern(literal))
            either.append(f"b.text LIKE ${len(patterns) + 1}")
        clauses.append("(" + " OR ".join(either) + ")")
    return HOLDS_SQL.format(" AND ".join(clauses)), patterns


def words_sql(branches: list[list[str]]) -> str:
    """`AND (code_trigrams(b.text) @> $2 OR ...)`: a block holds every trigram of one branch."""
    return " AND (" + " OR ".join(f"code_trigrams(b.text) @> ${n}::text[]" for n in range(2, len(branches) + 2)) + ")"


async def trigrams(conn: asyncpg.Connection, literals: list[str]) -> list[frozenset[str]]:
    """Each literal's trigrams (remembered: pg_trgm gives a literal the same ones every time)."""
    missing = [lit for lit in dict.fromkeys(literals) if lit not in TRIGRAMS]
    if missing:
        if len(TRIGRAMS) + len(missing) > MAX_REMEMBERED:
            TRIGRAMS.clear()
        for lit, row in zip(missing, await conn.fetch(TRIGRAMS_SQL, missing), strict=True):
            TRIGRAMS[lit] = frozenset(row[0])
    return [TRIGRAMS[lit] for lit in literals]


async def trigram_branches(conn: asyncpg.Connection, filter_: Prefilter) -> list[list[str]]:
    """The prefilter's literals as trigram arrays a candidate block contains one of ([] for none: the
    pattern scans). The groups of one literal are AND-ed into one array; the first group of several
    literals makes one array each (with those), later such groups are left to RE2, as is a literal
    that gives no trigram: a condition per array keeps every one an index condition."""
    literals = [lit for group in filter_.groups for lit in group]
    if not literals:
        return []
    arrays = iter(await trigrams(conn, literals))
    groups = [[next(arrays) for _ in group] for group in filter_.groups]
    groups = [group for group in groups if all(group)]
    base: frozenset[str] = frozenset().union(*(group[0] for group in groups if len(group) == 1))
    either = next((group for group in groups if len(group) > 1), None)
    branches = [base | alternative for alternative in either] if either else [base]
    return [sorted(branch) for branch in branches if branch]


class CodeSearch:
    """grep over the line index (one per Archivist; the caller narrows `source_ids` to its scope)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def grep(self, request: GrepRequest, source_ids: list[UUID] | None) -> GrepOutcome:
        check_request(request)
        matcher = LineMatcher(request.pattern, request.literal, request.case_sensitive)
        filter_ = prefilter(request.pattern, request.literal, request.case_sensitive)
        glob = compile_glob(request.path) if request.path is not None else None
        try:
            async with self.db.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
                await conn.execute(f"SET LOCAL statement_timeout = {STATEMENT_MS}; {PLANNER}")
                branches = await trigram_branches(conn, filter_)
                if branches:
                    order = await self._candidates(conn, branches, source_ids, glob)
                    tally = Tally(request.offset + request.limit, request.offset, bounded=order.total > PROBE)
                    exact = await self._walk_blocks(conn, order, matcher, tally, literals_sql(filter_))
                else:
                    files = [
                        FileRef(r["path"], r["source_id"], r["document_id"])
                        for r in await conn.fetch(FILES_SQL, source_ids)
                        if glob is None or matches(glob, r["path"])
                    ]
                    tally = Tally(request.offset + request.limit, request.offset)
                    exact = await self._walk_files(conn, files, matcher, tally)
        except asyncpg.QueryCanceledError:
            raise CallTimeout(
                "grep took too long over these sources.",
                "Narrow it: a longer literal in the pattern, a path glob, or fewer sources.",
            ) from None
        more = tally.total > tally.wanted or not exact
        next_offset = request.offset + len(tally.hits) if more and tally.hits else None
        return GrepOutcome(tally.hits, tally.total, exact, not branches, next_offset, filter_)

    async def _candidates(
        self, conn: asyncpg.Connection, branches: list[list[str]], source_ids: list[UUID] | None, glob: Any
    ) -> Candidates:
        """Every candidate block (its ctid: a row of this snapshot, and its text when they are few) with
        the file it is read for, in path then line order; a file the `path` glob leaves out is dropped."""
        sql = CANDIDATES_SQL.format(words=words_sql(branches))
        if glob is not None:  # filtered here: every row is read to know how many are left
            order = paired(await conn.fetch(sql, source_ids, *branches), glob)
            return Candidates(len(order), order)
        return await Candidates.read(await conn.cursor(sql, source_ids, *branches))

    async def _walk_blocks(
        self,
        conn: asyncpg.Connection,
        order: Candidates,
        matcher: LineMatcher,
        tally: Tally,
        literals: tuple[str, list[str]],
    ) -> bool:
        """Read the candidate blocks in path then line order, a batch at a time, until the page is full and
        the count budget spent; True when every one was read (the total is exact). A block PostgreSQL
        finds without the pattern's literals (`literals`: literals_sql) has no matching line: its text
        never comes here, and it counts against the budgets as a block read."""
        started = time.monotonic()
        sql, patterns = BY_CTID_SQL + literals[0], literals[1]
        i = 0
        while i < order.total:
            if time.monotonic() - started > DEADLINE_SECONDS:
                return False
            wanted = i + tally.next_batch(order.total - i)
            await order.upto(wanted)
            batch = order.items[i:wanted]
            if not batch:  # fewer rows than counted (cannot happen in one snapshot): stop, not loop
                return False
            unread = list(dict.fromkeys(c["ctid"] for _, c in batch if c["text"] is None))
            by_ctid = {row["ctid"]: row for row in await conn.fetch(sql, unread, *patterns)} if unread else {}
            for file, candidate in batch:
                row = candidate if candidate["text"] is not None else by_ctid.get(candidate["ctid"])
                if row is None:  # read by PostgreSQL only: no line of it matches
                    if not self._spend(tally, started):
                        return False
                elif not self._count_block(file, row, matcher, tally, started):
                    return False
                i += 1
        return True

    async def _walk_files(
        self, conn: asyncpg.Connection, files: list[FileRef], matcher: LineMatcher, tally: Tally
    ) -> bool:
        """A scan (no literal to narrow by): every block of the files in path order, a window of files at
        a time, until the page is full and the count budget spent; True when every file was read."""
        started = time.monotonic()
        i = 0
        while i < len(files):
            if time.monotonic() - started > DEADLINE_SECONDS:
                return False
            window = files[i : i + tally.next_window(len(files) - i)]
            rows = await conn.fetch(BY_DOCUMENT_SQL, list({f.document_id for f in window}))
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

    def _spend(self, tally: Tally, started: float) -> bool:
        """Account for one candidate block read; False once a budget is spent (the block is then not counted)."""
        now = time.monotonic()
        if now - started > DEADLINE_SECONDS:
            return False
        if tally.page_full_at is not None:
            tally.blocks_past += 1
            if (tally.bounded and tally.blocks_past > COUNT_BLOCKS) or now - tally.page_full_at > COUNT_SECONDS:
                return False
        tally.blocks_read += 1
        return True

    def _count_block(self, file: FileRef, row: Any, matcher: LineMatcher, tally: Tally, started: float) -> bool:
        """Count one candidate block's matching lines (keeping the page's); False once a budget is spent."""
        if not self._spend(tally, started):
            return False
        if tally.page_full_at is not None and row["line_start"] != row["line_end"]:
            # past the page: only how many lines match (a block of several lines shares none with
            # another block, so none was counted before)
            tally.total += matcher.count(row["line_start"], row["line_end"], row["text"])
            tally.last = None
            return True
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
