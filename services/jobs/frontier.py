"""The frontier of a job, in Postgres: the URLs a crawl has seen, the files a folder or git sync works
through. Crawls and both syncs share it (a job's counters are computed from it, services/jobs/sql.py),
so it lives with the jobs rather than in one of its users.

The frontier (`crawl_frontier`) holds every URL the job has seen, keyed (job_id, url), with its depth
and state. Rows are claimed `pending -> fetching` in breadth-first order and end `done`, `failed`,
`skipped` (robots, pattern, off-scope, non-text, noindex, duplicate, max-pages), `gone` (404/410 or no longer
linked: its document was deleted) or `redirected` (crawled under its final URL). A worker that dies
leaves rows in `fetching`; whoever resumes the job puts them back to `pending`. Documents are unique
per (source, url) and ingestion is an upsert, so a page fetched again after a crash is never stored
twice.

The order does not depend on timing (CPU load, slow pages): a row's `rank` is its parent's rank
followed by the link's position on the parent page (sitemap and llms.txt URLs: `[-1, i]`, the start
page `[0]`), and an ordered frontier (crawls) hands out a level only once the level above it is
settled, so every page of depth d is known, at its smallest rank, before any is claimed. Claims go
by (depth, rank): the page set within max_pages is that of a breadth-first crawl in discovery order.

A recrawl first revisits the pages the source already holds from this crawl (`origin = 'previous'`,
`known`), in the order the last crawl found them, with conditional requests; only then does it
follow new links, with the budget that is left. Known pages are `reached` once a link, the sitemap
or llms.txt of this crawl leads to them (see services/crawl/runner.py for what happens to the rest).

The frontier writes only its own table: a page fetched again refreshes its document's `fetched_at`
through the hook it is given (`DocumentService.touch_fetched`: only services/documents/ writes documents).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from uuid import UUID

import asyncpg

from services.jobs import sql

ADD_ATTEMPTS = 3


@dataclass(frozen=True)
class FrontierRow:
    """A claimed URL of the frontier."""

    url: str
    depth: int
    origin: str
    attempts: int
    rank: tuple[int, ...] = ()
    known: bool = False  # a page the source held when this recrawl started


@dataclass(frozen=True)
class RowResult:
    """How a frontier row ended; written in one UPDATE."""

    state: str
    outcome: str | None = None
    skip_reason: str | None = None
    error: str | None = None
    http_status: int | None = None
    final_url: str | None = None
    document_id: UUID | None = None
    etag: str | None = None
    last_modified: str | None = None
    content_hash: str | None = None
    chunks: int = 0
    chunks_embedded: int = 0


Entry = tuple[str, int, str, str | None]  # url, depth, origin, skip reason
Ranked = tuple[str, int, str, str | None, list[int]]  # ... and rank
Known = tuple[str, int, list[int] | None]  # url, depth, rank (None: unknown)
#: what a row settled `done` with a document does to it (a fetch refreshes the document's `fetched_at`)
DoneHook = Callable[[UUID], Awaitable[None]]


def dedupe_min_depth(entries: Iterable[Entry], parent_rank: Iterable[int] = ()) -> list[Ranked]:
    """One entry per URL (the shallowest, then the first): an upsert may touch each row only once per
    statement. Each entry's rank is `parent_rank` followed by its position in `entries`."""
    base = list(parent_rank)
    best: dict[str, Ranked] = {}
    for i, (url, depth, origin, reason) in enumerate(entries):
        current = best.get(url)
        if current is None or depth < current[1]:
            best[url] = (url, depth, origin, reason, [*base, i])
    return list(best.values())


class Frontier:
    """The SQL of one job's frontier."""

    def __init__(
        self, pool: asyncpg.Pool, job_id: UUID, ordered: bool = False, on_done: DoneHook | None = None
    ) -> None:
        self.pool = pool
        self.job_id = job_id
        self.ordered = ordered  # level by level, known pages first (crawls; syncs claim by depth only)
        self.on_done = on_done  # DocumentService.touch_fetched
        # Many pages of a job add overlapping link sets at once: one insert at a time in this process
        # (and a retry against another worker process) so their row locks cannot deadlock.
        self._add_lock = asyncio.Lock()

    async def recover(self) -> int:
        """Put rows a dead (or stopped) worker left in `fetching` back to `pending`."""
        status = await self.pool.execute(
            "UPDATE crawl_frontier SET state = 'pending' WHERE job_id = $1 AND state = 'fetching'", self.job_id
        )
        return int(status.split()[-1])

    async def add(self, entries: Iterable[Entry], parent_rank: Iterable[int] = ()) -> None:
        """Insert (url, depth, origin, skip_reason) rows: pending, or skipped when a reason is given.

        A URL already pending moves to a shallower depth or smaller rank; a known page is marked reached.
        """
        rows = dedupe_min_depth(entries, parent_rank)
        if not rows:
            return
        async with self._add_lock:
            for attempt in range(ADD_ATTEMPTS):
                try:
                    await self._insert(rows)
                    return
                except asyncpg.DeadlockDetectedError:
                    if attempt == ADD_ATTEMPTS - 1:
                        raise

    async def _insert(self, rows: list[Ranked]) -> None:
        # `better`: a pending row (not a known page: its place is fixed) found shallower or earlier.
        better = (
            "(NOT crawl_frontier.known AND crawl_frontier.state = 'pending' AND EXCLUDED.state = 'pending' "
            " AND (NOT crawl_frontier.linked OR (EXCLUDED.depth, EXCLUDED.rank) < (crawl_frontier.depth, "
            " crawl_frontier.rank)))"
        )
        await self.pool.execute(
            "INSERT INTO crawl_frontier (job_id, url, depth, origin, state, skip_reason, rank) "
            "SELECT $1, t.url, t.depth, t.origin, CASE WHEN t.reason IS NULL THEN 'pending' ELSE 'skipped' END, "
            "  t.reason, string_to_array(t.rank, ',')::int[] "
            "FROM unnest($2::text[], $3::int[], $4::text[], $5::text[], $6::text[]) "
            "  AS t(url, depth, origin, reason, rank) "
            "ON CONFLICT (job_id, url) DO UPDATE SET linked = true, reached = true, "
            f"  depth = CASE WHEN {better} THEN EXCLUDED.depth ELSE crawl_frontier.depth END, "
            f"  rank = CASE WHEN {better} THEN EXCLUDED.rank ELSE crawl_frontier.rank END "
            f"WHERE {better} OR NOT crawl_frontier.reached",
            self.job_id,
            [r[0] for r in rows],
            [r[1] for r in rows],
            [r[2] for r in rows],
            [r[3] for r in rows],
            [",".join(map(str, r[4])) for r in rows],
        )

    async def known_pages(
        self, source_id: UUID, root: str, default_depth: int
    ) -> list[tuple[str, int, list[int] | None]]:
        """(url, depth, rank) of the pages a source holds from the crawl of `root`, as the last crawl that
        fetched each found it: the order a recrawl revisits them in (then by URL)."""
        rows = await self.pool.fetch(
            sql.KNOWN_PAGES,
            source_id,
            root,
            default_depth,
            self.job_id,
        )
        return [(r["url"], r["depth"], r["rank"]) for r in rows]

    async def add_known(self, pages: list[Known]) -> None:
        """Seed a recrawl with the pages the source holds, (url, depth, rank) in the order to revisit them
        (no rank: after those with one): claimed before any other page, not reached until a link or the
        sitemap leads to them."""
        await self.pool.execute(
            "INSERT INTO crawl_frontier (job_id, url, depth, origin, known, reached, rank) "
            "SELECT $1, t.url, t.depth, 'previous', true, false, "
            "  coalesce(string_to_array(t.rank, ',')::int[], ARRAY[2147483647, t.i::int]) "
            "FROM unnest($2::text[], $3::int[], $4::text[]) WITH ORDINALITY AS t(url, depth, rank, i) ORDER BY t.i "
            "ON CONFLICT (job_id, url) DO UPDATE SET known = true",
            self.job_id,
            [p[0] for p in pages],
            [p[1] for p in pages],
            [None if not p[2] else ",".join(map(str, p[2])) for p in pages],
        )

    async def claim(self, limit: int) -> list[FrontierRow]:
        """Take up to `limit` pending, linked rows, shallowest first; an ordered frontier takes known pages
        first, then only rows of the shallowest open level (nothing deeper while it has rows pending or
        being fetched), by rank."""
        gate = "AND (f.known OR (NOT g.known_left AND f.depth = g.level))" if self.ordered else ""
        rows = await self.pool.fetch(
            # A CTE runs the LIMIT once; as a join subquery it may be re-run and claim more rows.
            "WITH g AS (SELECT coalesce(bool_or(known), false) AS known_left, "
            "  min(depth) FILTER (WHERE NOT known) AS level FROM crawl_frontier "
            "  WHERE job_id = $1 AND state IN ('pending', 'fetching') AND linked), "
            "picked AS MATERIALIZED (SELECT f.url FROM crawl_frontier f, g "
            f"  WHERE f.job_id = $1 AND f.state = 'pending' AND f.linked {gate} "
            "  ORDER BY f.known DESC, f.depth, f.rank, f.seq LIMIT $2 FOR UPDATE OF f SKIP LOCKED) "
            "UPDATE crawl_frontier f SET state = 'fetching', attempts = f.attempts + 1 FROM picked "
            "WHERE f.job_id = $1 AND f.url = picked.url "
            "RETURNING f.url, f.depth, f.origin, f.attempts, f.seq, f.rank, f.known",
            self.job_id,
            limit,
        )
        ordered = sorted(rows, key=lambda r: (not r["known"], r["depth"], r["rank"], r["seq"]))
        return [
            FrontierRow(r["url"], r["depth"], r["origin"], r["attempts"], tuple(r["rank"]), r["known"]) for r in ordered
        ]

    async def claim_redirect_target(self, final_url: str, source: FrontierRow) -> FrontierRow | None:
        """Own the row of a redirect's target (inserting it if new, in the redirecting row's place); None
        if it is taken or finished."""
        row = await self.pool.fetchrow(
            "INSERT INTO crawl_frontier (job_id, url, depth, origin, state, attempts, rank) "
            "VALUES ($1, $2, $3, 'redirect', 'fetching', 1, $4) "
            "ON CONFLICT (job_id, url) DO UPDATE SET state = 'fetching', linked = true, reached = true, "
            "  attempts = crawl_frontier.attempts + 1, depth = LEAST(crawl_frontier.depth, EXCLUDED.depth) "
            "WHERE crawl_frontier.state = 'pending' RETURNING url, depth, origin, attempts, rank, known",
            self.job_id,
            final_url,
            source.depth,
            list(source.rank),
        )
        if row is None:  # fetched already (e.g. a known page a recrawl revisited): the redirect reached it
            await self.pool.execute(
                "UPDATE crawl_frontier SET reached = true WHERE job_id = $1 AND url = $2 AND NOT reached",
                self.job_id,
                final_url,
            )
            return None
        return FrontierRow(row["url"], row["depth"], row["origin"], row["attempts"], tuple(row["rank"]), row["known"])

    async def finish_row(self, url: str, result: RowResult) -> None:
        """Settle a row; a row settled `done` with a document is handed to `on_done` (a page fetched
        again, 200 or 304, refreshes its document's `fetched_at`)."""
        status = await self.pool.execute(
            "UPDATE crawl_frontier SET state = $3, outcome = $4, skip_reason = $5, error = $6, "
            "http_status = $7, final_url = $8, document_id = $9, etag = $10, last_modified = $11, "
            "content_hash = $12, chunks = $13, chunks_embedded = $14, fetched_at = now() "
            "WHERE job_id = $1 AND url = $2",
            self.job_id,
            url,
            result.state,
            result.outcome,
            result.skip_reason,
            result.error,
            result.http_status,
            result.final_url,
            result.document_id,
            result.etag,
            result.last_modified,
            result.content_hash,
            result.chunks,
            result.chunks_embedded,
        )
        settled = status != "UPDATE 0"
        if settled and result.state == "done" and result.document_id is not None and self.on_done is not None:
            await self.on_done(result.document_id)

    async def count(self, where: str) -> int:
        return int(
            await self.pool.fetchval(f"SELECT count(*) FROM crawl_frontier WHERE job_id = $1 AND {where}", self.job_id)
        )

    async def done_count(self) -> int:
        return await self.count("state = 'done'")

    async def written_documents(self) -> list[UUID]:
        """Documents whose chunks this job wrote (created or updated pages)."""
        rows = await self.pool.fetch(
            "SELECT DISTINCT document_id FROM crawl_frontier WHERE job_id = $1 AND chunks_embedded > 0 "
            "AND document_id IS NOT NULL",
            self.job_id,
        )
        return [r["document_id"] for r in rows]

    async def fail_stuck(self) -> int:
        """Rows still `fetching` when every task has ended: their task died on an unexpected error."""
        status = await self.pool.execute(
            "UPDATE crawl_frontier SET state = 'failed', error = 'internal error', fetched_at = now() "
            "WHERE job_id = $1 AND state = 'fetching'",
            self.job_id,
        )
        return int(status.split()[-1])

    async def skip_pending(self, reason: str) -> int:
        """Mark every linked pending row skipped (the page budget is spent)."""
        status = await self.pool.execute(
            "UPDATE crawl_frontier SET state = 'skipped', skip_reason = $2 "
            "WHERE job_id = $1 AND state = 'pending' AND linked",
            self.job_id,
            reason,
        )
        return int(status.split()[-1])

    async def held_count(self) -> int:
        """Pages this job holds in the source: fetched, or known pages kept after a failed fetch."""
        return await self.count("state = 'done' OR (state = 'failed' AND known AND document_id IS NOT NULL)")

    async def known_urls(self, where: str) -> list[str]:
        """Known pages (a recrawl's) matching `where`, in the order they were to be revisited."""
        rows = await self.pool.fetch(
            f"SELECT url FROM crawl_frontier WHERE job_id = $1 AND known AND {where} ORDER BY rank, seq",
            self.job_id,
        )
        return [r["url"] for r in rows]

    async def transient_failures(self) -> int:
        """Failed rows other than 404/410: the crawl may have missed links behind them."""
        return await self.count("state = 'failed' AND coalesce(http_status, 0) NOT IN (404, 410)")

    async def first_error(self) -> tuple[str, str] | None:
        row = await self.pool.fetchrow(
            "SELECT url, error FROM crawl_frontier WHERE job_id = $1 AND state = 'failed' "
            "ORDER BY fetched_at NULLS LAST, seq LIMIT 1",
            self.job_id,
        )
        return (row["url"], row["error"] or "failed") if row else None

    async def skipped_summary(self) -> dict[str, int]:
        rows = await self.pool.fetch(
            "SELECT coalesce(skip_reason, 'other') AS reason, count(*) AS n FROM crawl_frontier "
            "WHERE job_id = $1 AND state = 'skipped' GROUP BY 1 ORDER BY 2 DESC",
            self.job_id,
        )
        return {r["reason"]: r["n"] for r in rows}
