"""The URL frontier of a crawl job, in Postgres.

The frontier (`crawl_frontier`) holds every URL the job has seen, keyed (job_id, url), with its depth
and state. Rows are claimed `pending -> fetching` in breadth-first order and end `done`, `failed`,
`skipped` (robots, pattern, off-scope, non-text, noindex, duplicate, max-pages), `gone` (404/410 or no longer
linked: its document was deleted) or `redirected` (crawled under its final URL). A worker that dies
leaves rows in `fetching`; whoever resumes the job puts them back to `pending`. Documents are unique
per (source, url) and ingestion is an upsert, so a page fetched again after a crash is never stored
twice.

A recrawl also seeds the URLs of the pages the source already holds from this crawl (`origin =
'previous'`, `linked = false`). They are fetched only once the crawl finds them again (a link, the
sitemap, llms.txt); those it never finds are no longer reachable and their documents are deleted,
unless the crawl stopped early (max_pages, failures), when nothing is deleted on that ground.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from uuid import UUID

import asyncpg

ERROR_LENGTH = 300
ADD_ATTEMPTS = 3


@dataclass(frozen=True)
class FrontierRow:
    """A claimed URL of the frontier."""

    url: str
    depth: int
    origin: str
    attempts: int


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


def short_error(text: str | None) -> str:
    """One line, at most ERROR_LENGTH characters: what agents see, never a stack trace."""
    line = " ".join((text or "failed").split())
    return line if len(line) <= ERROR_LENGTH else line[: ERROR_LENGTH - 1] + "…"


def dedupe_min_depth(entries: Iterable[tuple[str, int, str, str | None]]) -> list[tuple[str, int, str, str | None]]:
    """One entry per URL (the shallowest): an upsert may touch each row only once per statement."""
    best: dict[str, tuple[str, int, str, str | None]] = {}
    for entry in entries:
        current = best.get(entry[0])
        if current is None or entry[1] < current[1]:
            best[entry[0]] = entry
    return list(best.values())


class Frontier:
    """The SQL of one job's URL frontier."""

    def __init__(self, pool: asyncpg.Pool, job_id: UUID) -> None:
        self.pool = pool
        self.job_id = job_id
        # Many pages of a job add overlapping link sets at once: one insert at a time in this process
        # (and a retry against another worker process) so their row locks cannot deadlock.
        self._add_lock = asyncio.Lock()

    async def recover(self) -> int:
        """Put rows a dead (or stopped) worker left in `fetching` back to `pending`."""
        status = await self.pool.execute(
            "UPDATE crawl_frontier SET state = 'pending' WHERE job_id = $1 AND state = 'fetching'", self.job_id
        )
        return int(status.split()[-1])

    async def add(self, entries: Iterable[tuple[str, int, str, str | None]]) -> None:
        """Insert (url, depth, origin, skip_reason) rows: pending, or skipped when a reason is given.

        A URL already pending is re-linked (a recrawl's previous page found again) at its shallower depth.
        """
        rows = dedupe_min_depth(entries)
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

    async def _insert(self, rows: list[tuple[str, int, str, str | None]]) -> None:
        await self.pool.execute(
            "INSERT INTO crawl_frontier (job_id, url, depth, origin, state, skip_reason) "
            "SELECT $1, t.url, t.depth, t.origin, CASE WHEN t.reason IS NULL THEN 'pending' ELSE 'skipped' END, "
            "  t.reason FROM unnest($2::text[], $3::int[], $4::text[], $5::text[]) AS t(url, depth, origin, reason) "
            "ON CONFLICT (job_id, url) DO UPDATE SET linked = true, "
            "  depth = LEAST(crawl_frontier.depth, EXCLUDED.depth) "
            "WHERE crawl_frontier.state = 'pending' AND EXCLUDED.state = 'pending' "
            "  AND (NOT crawl_frontier.linked OR EXCLUDED.depth < crawl_frontier.depth)",
            self.job_id,
            [r[0] for r in rows],
            [r[1] for r in rows],
            [r[2] for r in rows],
            [r[3] for r in rows],
        )

    async def add_previous(self, urls: list[str], depth: int) -> None:
        """Seed a recrawl with the pages it must find again (not fetched until linked)."""
        await self.pool.execute(
            "INSERT INTO crawl_frontier (job_id, url, depth, origin, linked) "
            "SELECT $1, u, $3, 'previous', false FROM unnest($2::text[]) AS u ON CONFLICT DO NOTHING",
            self.job_id,
            urls,
            depth,
        )

    async def claim(self, limit: int) -> list[FrontierRow]:
        """Take up to `limit` pending, linked rows, shallowest first."""
        rows = await self.pool.fetch(
            # A CTE runs the LIMIT once; as a join subquery it may be re-run and claim more rows.
            "WITH picked AS MATERIALIZED (SELECT url FROM crawl_frontier "
            "  WHERE job_id = $1 AND state = 'pending' AND linked ORDER BY depth, seq LIMIT $2 FOR UPDATE SKIP LOCKED) "
            "UPDATE crawl_frontier f SET state = 'fetching', attempts = f.attempts + 1 FROM picked "
            "WHERE f.job_id = $1 AND f.url = picked.url RETURNING f.url, f.depth, f.origin, f.attempts, f.seq",
            self.job_id,
            limit,
        )
        ordered = sorted(rows, key=lambda r: (r["depth"], r["seq"]))
        return [FrontierRow(r["url"], r["depth"], r["origin"], r["attempts"]) for r in ordered]

    async def claim_redirect_target(self, final_url: str, depth: int) -> FrontierRow | None:
        """Own the row of a redirect's target (inserting it if new); None if it is taken or finished."""
        row = await self.pool.fetchrow(
            "INSERT INTO crawl_frontier (job_id, url, depth, origin, state, attempts) "
            "VALUES ($1, $2, $3, 'redirect', 'fetching', 1) "
            "ON CONFLICT (job_id, url) DO UPDATE SET state = 'fetching', linked = true, "
            "  attempts = crawl_frontier.attempts + 1, depth = LEAST(crawl_frontier.depth, EXCLUDED.depth) "
            "WHERE crawl_frontier.state = 'pending' RETURNING url, depth, origin, attempts",
            self.job_id,
            final_url,
            depth,
        )
        return FrontierRow(row["url"], row["depth"], row["origin"], row["attempts"]) if row else None

    async def finish_row(self, url: str, result: RowResult) -> None:
        await self.pool.execute(
            "UPDATE crawl_frontier SET state = $3, outcome = $4, skip_reason = $5, error = $6, http_status = $7, "
            "final_url = $8, document_id = $9, etag = $10, last_modified = $11, content_hash = $12, "
            "chunks = $13, chunks_embedded = $14, fetched_at = now() WHERE job_id = $1 AND url = $2",
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

    async def count(self, where: str) -> int:
        return await self.pool.fetchval(
            f"SELECT count(*) FROM crawl_frontier WHERE job_id = $1 AND {where}", self.job_id
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

    async def unreached_previous(self) -> list[str]:
        rows = await self.pool.fetch(
            "SELECT url FROM crawl_frontier WHERE job_id = $1 AND state = 'pending' AND NOT linked", self.job_id
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
