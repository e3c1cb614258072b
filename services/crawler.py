"""Runs one crawl job: discovery, the URL frontier in Postgres, polite fetching, ingestion, recrawl rules.

The frontier (`crawl_frontier`) holds every URL the job has seen, keyed (job_id, url), with its depth
and state. Rows are claimed `pending -> fetching` in breadth-first order and end `done`, `failed`,
`skipped` (robots, pattern, off-scope, non-text, duplicate, max-pages), `gone` (404/410 or no longer
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
import logging
import time
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit
from uuid import UUID

import asyncpg

from models.jobs import CrawlJob, CrawlParams
from services.crawl.politeness import HostThrottle
from services.crawl.robots import RobotsPolicy, fetch_text, parse_llms_txt, parse_sitemap
from services.crawl.urls import host_key, in_scope, matches_patterns, normalize_url
from services.documents import page_content
from services.errors import NotFound, ServiceError, unavailable_from
from services.fetchers import create_fetcher
from services.fetchers.base import Fetcher, FetchResult

if TYPE_CHECKING:
    from services.app import Archivist

logger = logging.getLogger(__name__)

WATCH_SECONDS = 0.5  # how often the cancel flag is read (cancel must take effect within 2 s)
MAX_SITEMAPS = 10
MAX_SEED_URLS = 5000
MAX_DISCOVERY_BYTES = 2_000_000
ERROR_LENGTH = 300
GONE_STATUSES = frozenset({404, 410})
NON_TEXT_PREFIX = "non-text content"
PREVIOUS_GONE_ERROR = "no longer linked from the site"


@dataclass(frozen=True)
class FrontierRow:
    """A claimed URL of the frontier."""

    url: str
    depth: int
    origin: str
    attempts: int


@dataclass(frozen=True)
class KnownDocument:
    """The document a source already holds for a URL (its validators allow a conditional request)."""

    id: UUID
    content_hash: str
    chunk_count: int
    etag: str | None
    last_modified: str | None
    created_at: datetime
    updated_at: datetime


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


def site_root(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


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


class RobotsCache:
    """robots.txt per host, fetched once per job; applies Crawl-delay to the throttle."""

    def __init__(self, app: Archivist, throttle: HostThrottle, warnings: list[str]) -> None:
        self.settings = app.settings
        self.throttle = throttle
        self.warnings = warnings
        self._policies: dict[str, RobotsPolicy] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def policy(self, url: str) -> RobotsPolicy:
        key = host_key(url)
        async with self._locks.setdefault(key, asyncio.Lock()):
            if key not in self._policies:
                self._policies[key] = await self._load(url)
        return self._policies[key]

    async def _load(self, url: str) -> RobotsPolicy:
        robots_url = site_root(url) + "/robots.txt"
        status, text = await fetch_text(
            robots_url,
            user_agent=self.settings.crawl_user_agent,
            timeout=self.settings.crawl_page_timeout,
            max_bytes=MAX_DISCOVERY_BYTES,
            allow_private=self.settings.crawl_allow_private,
        )
        if status == 0:
            # No answer at all: the page fetches will fail with the real network error, so let them.
            policy = RobotsPolicy.allow_all()
        else:
            policy = RobotsPolicy.from_response(status, text, self.settings.crawl_user_agent)
            if status >= 500:
                self.warnings.append(f"{robots_url} answered HTTP {status}: the site is not crawled (RFC 9309).")
        self.throttle.set_host_delay(url, policy.crawl_delay)  # None clears a delay left by an earlier job
        return policy


class CrawlRunner:
    """Runs one claimed job to completion, cancellation, hand-back (stop) or loss of ownership."""

    def __init__(self, app: Archivist, job: CrawlJob, worker_id: str, stop: asyncio.Event) -> None:
        self.app = app
        self.settings = app.settings
        self.job = job
        self.params: CrawlParams = job.params
        self.worker_id = worker_id
        self.stop = stop
        self.frontier = Frontier(app.db.pool, job.id)
        self.warnings: list[str] = []
        if job.attempts > 1:
            self.warnings.append(
                f"Resumed by worker {worker_id} after the previous worker stopped (attempt {job.attempts})."
            )
        self.throttle = app.jobs.throttle
        self.robots = RobotsCache(app, self.throttle, self.warnings)
        self.cancel_event = app.jobs.cancel_event(job.id)
        self.interrupt = asyncio.Event()
        self.interrupt_reason: str | None = None
        self.ingested = 0
        self.fetcher: Fetcher | None = None

    # ---------- the job ----------

    async def run(self) -> None:
        """Crawl, then record the final status (or hand the job back / leave it to its new owner)."""
        watcher = asyncio.create_task(self._watch(), name=f"crawl-watch-{self.job.id}")
        try:
            recovered = await self.frontier.recover()
            if recovered:
                logger.info(
                    "job %s: %d pages left mid-fetch by a previous worker go back to pending", self.job.id, recovered
                )
            self.ingested = await self.frontier.done_count()
            self.fetcher = await asyncio.to_thread(create_fetcher, self.settings)
            if await self._unless_interrupted(self._seed_once()):
                await self._crawl()
            await self._conclude()
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            self.app.jobs.forget_cancel_event(self.job.id)
            if self.fetcher is not None:
                await self.fetcher.close()

    async def _unless_interrupted(self, work: Coroutine[Any, Any, None]) -> bool:
        """Run `work` unless a cancel / stop / loss of ownership comes first (then cancel it: False)."""
        task = asyncio.create_task(work)
        interrupted = asyncio.create_task(self.interrupt.wait())
        try:
            await asyncio.wait([task, interrupted], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pending in (task, interrupted):
                if not pending.done():
                    pending.cancel()
            await asyncio.gather(task, interrupted, return_exceptions=True)
        if task.cancelled():
            return False
        task.result()  # re-raise what the work raised
        return True

    async def _conclude(self) -> None:
        reason = self.interrupt_reason
        if reason == "lost":
            logger.warning("job %s was taken over by another worker; %s stops", self.job.id, self.worker_id)
        elif reason == "stop":
            await self.app.jobs.release(self.job.id, self.worker_id)
        elif reason == "cancel":
            await self.frontier.recover()
            await self.app.jobs.finish(self.job.id, self.worker_id, "cancelled", None, self.warnings)
            logger.info("job %s cancelled", self.job.id)
        else:
            await self._complete()

    # ---------- seeding ----------

    async def _seed_once(self) -> None:
        """Start URL, sitemaps, llms.txt and (recrawl) the previous pages; once per job, idempotent."""
        seeded = await self.app.db.pool.fetchval("SELECT seeded FROM crawl_jobs WHERE id = $1", self.job.id)
        if seeded:
            return
        start = self.params.url
        await self.frontier.add([(start, 0, "start", None)])
        if self.params.depth_limit >= 1:
            discovered = await self._discover()
            await self.frontier.add((url, 1, origin, self.refusal(url)) for url, origin in discovered)
        if self.job.kind == "recrawl":
            await self.frontier.add_previous(await self._previous_urls(), self.params.depth_limit)
        await self.app.db.pool.execute("UPDATE crawl_jobs SET seeded = true WHERE id = $1", self.job.id)

    async def _discover(self) -> list[tuple[str, str]]:
        """Page URLs from the sitemaps (robots.txt's and /sitemap.xml) and /llms.txt of the start host."""
        root = site_root(self.params.url)
        policy = await self.robots.policy(self.params.url)
        queue = list(dict.fromkeys([*policy.sitemaps, root + "/sitemap.xml"]))
        found: list[tuple[str, str]] = []
        seen: set[str] = set()
        while queue and len(seen) < MAX_SITEMAPS and len(found) < MAX_SEED_URLS:
            sitemap_url = normalize_url(queue.pop(0))
            if sitemap_url is None or sitemap_url in seen:
                continue
            seen.add(sitemap_url)
            status, text = await self._fetch_discovery_file(sitemap_url)
            if status == 200:
                pages, nested = parse_sitemap(text)
                found.extend((u, "sitemap") for u in pages)
                queue.extend(nested)
        llms_url = root + "/llms.txt"
        status, text = await self._fetch_discovery_file(llms_url)
        if status == 200:
            found.extend((u, "llms") for u in parse_llms_txt(text, llms_url))
        normalized = [(normalize_url(u), origin) for u, origin in found[:MAX_SEED_URLS]]
        return [(u, origin) for u, origin in normalized if u]

    async def _fetch_discovery_file(self, url: str) -> tuple[int, str]:
        return await fetch_text(
            url,
            user_agent=self.settings.crawl_user_agent,
            timeout=self.settings.crawl_page_timeout,
            max_bytes=MAX_DISCOVERY_BYTES,
            allow_private=self.settings.crawl_allow_private,
        )

    async def _previous_urls(self) -> list[str]:
        rows = await self.app.db.pool.fetch(
            "SELECT url FROM documents WHERE source_id = $1 AND url IS NOT NULL AND metadata->>'crawl_root' = $2",
            self.job.source_id,
            self.params.url,
        )
        return [r["url"] for r in rows]

    def refusal(self, url: str) -> str | None:
        """Why a discovered URL is not fetched (off-scope, pattern), or None."""
        if not in_scope(url, self.params.url, self.params.scope):
            return "off-scope"
        if not matches_patterns(url, self.params.include_patterns, self.params.exclude_patterns):
            return "pattern"
        return None

    # ---------- scheduling ----------

    async def _crawl(self) -> None:
        """Keep up to `crawl_concurrency` pages in flight, never more than the remaining page budget."""
        in_flight: dict[asyncio.Task[None], FrontierRow] = {}
        interrupted = asyncio.create_task(self.interrupt.wait())
        try:
            while not self.interrupt.is_set():
                await self._schedule(in_flight)
                if not in_flight:
                    break
                done, _ = await asyncio.wait([*in_flight, interrupted], return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    if task is not interrupted:
                        in_flight.pop(task)
                        self._log_task_failure(task)
        finally:
            interrupted.cancel()
            for task in in_flight:
                task.cancel()
            await asyncio.gather(interrupted, *in_flight, return_exceptions=True)

    async def _schedule(self, in_flight: dict[asyncio.Task[None], FrontierRow]) -> None:
        budget = self.params.max_pages - self.ingested - len(in_flight)
        slots = min(self.settings.crawl_concurrency - len(in_flight), budget)
        if slots <= 0:
            return
        for row in await self.frontier.claim(slots):
            in_flight[asyncio.create_task(self._process(row), name=f"crawl-{row.url}")] = row

    @staticmethod
    def _log_task_failure(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            logger.error("crawl task failed", exc_info=task.exception())

    async def _process(self, row: FrontierRow) -> None:
        """Crawl one row; any unexpected error fails that page only."""
        try:
            await self._crawl_page(row)
        except asyncio.CancelledError:
            raise
        except ServiceError as exc:
            await self.frontier.finish_row(row.url, RowResult("failed", error=short_error(exc.message)))
        except Exception as exc:
            logger.exception("job %s: unexpected error crawling %s", self.job.id, row.url)
            await self.frontier.finish_row(
                row.url, RowResult("failed", error=f"unexpected error: {type(exc).__name__}")
            )

    # ---------- one page ----------

    async def _crawl_page(self, row: FrontierRow) -> None:
        if not (await self.robots.policy(row.url)).can_fetch(row.url):
            await self._skip(row.url, "robots")
            return
        known = await self._known_document(row.url)
        assert self.fetcher is not None
        async with self.throttle.slot(row.url):
            page = await self.fetcher.fetch(
                row.url, etag=known.etag if known else None, last_modified=known.last_modified if known else None
            )
        if page.not_modified and known is not None:
            await self._keep_unchanged(row, known, page)
        elif not page.ok:
            await self._record_failure(row, known, page)
        else:
            await self._ingest_fetched(row, known, page)

    async def _known_document(self, url: str) -> KnownDocument | None:
        row = await self.app.db.pool.fetchrow(
            "SELECT id, content_hash, chunk_count, created_at, updated_at, metadata->>'etag' AS etag, "
            "metadata->>'last_modified' AS last_modified FROM documents WHERE source_id = $1 AND url = $2",
            self.job.source_id,
            url,
        )
        return KnownDocument(**dict(row)) if row else None

    async def _skip(self, url: str, reason: str, known: KnownDocument | None = None, status: int | None = None) -> None:
        """Skip a page; a page the source held that may no longer be crawled loses its document."""
        outcome = "deleted" if known is not None and await self._delete_document(known.id) else None
        await self.frontier.finish_row(
            url, RowResult("skipped", outcome=outcome, skip_reason=reason, http_status=status)
        )

    async def _record_failure(self, row: FrontierRow, known: KnownDocument | None, page: FetchResult) -> None:
        if page.status in GONE_STATUSES and known is not None:
            deleted = await self._delete_document(known.id)
            result = RowResult(
                "gone", outcome="deleted" if deleted else None, http_status=page.status, error=f"HTTP {page.status}"
            )
            await self.frontier.finish_row(row.url, result)
        elif (page.error or "").startswith(NON_TEXT_PREFIX):
            await self._skip(row.url, "non-text", known, page.status)
        else:
            error = short_error(page.error or f"HTTP {page.status}")
            await self.frontier.finish_row(row.url, RowResult("failed", error=error, http_status=page.status or None))

    async def _keep_unchanged(self, row: FrontierRow, known: KnownDocument, page: FetchResult) -> None:
        """304: the stored document stands; its stored outlinks continue the crawl."""
        outcome = self._outcome_after_recovery(row, "unchanged", known.created_at, known.updated_at)
        result = RowResult(
            "done",
            outcome=outcome,
            http_status=304,
            document_id=known.id,
            etag=page.etag,
            last_modified=page.last_modified,
            content_hash=known.content_hash,
            chunks=known.chunk_count,
        )
        await self.frontier.finish_row(row.url, result)
        self.ingested += 1
        links = await self.app.db.pool.fetch("SELECT to_url FROM document_links WHERE from_document_id = $1", known.id)
        await self._enqueue_links(row, [r["to_url"] for r in links])

    async def _ingest_fetched(self, row: FrontierRow, known: KnownDocument | None, page: FetchResult) -> None:
        """A 2xx page: settle a redirect, then store the page under the URL it was finally served from."""
        target = row
        final_url = normalize_url(page.final_url or row.url) or row.url
        if final_url != row.url:
            claimed = await self._follow_redirect(row, known, final_url)
            if claimed is None:
                return
            target, known = claimed, await self._known_document(final_url)
        try:
            await self._store_page(target, known, page, follow_only=self._follow_only(row))
        except ServiceError as exc:
            await self.frontier.finish_row(target.url, RowResult("failed", error=short_error(exc.message)))

    def _follow_only(self, row: FrontierRow) -> bool:
        """The start page is read for its links even when the patterns leave it out of the source."""
        return row.origin == "start" and self.refusal(row.url) == "pattern"

    async def _store_page(
        self, target: FrontierRow, known: KnownDocument | None, page: FetchResult, follow_only: bool
    ) -> None:
        title, text, document_type = page_content(page)
        if follow_only:
            await self._enqueue_links(target, page.links)
            await self._skip(target.url, "pattern", known, page.status)
            return
        metadata = self._document_metadata(target, page)
        result = await self.app.documents.ingest(
            self.job.source_id, (title or target.url).strip()[:500], text, document_type, target.url, metadata
        )
        document = result.document
        if document.url != target.url:
            await self._skip(target.url, "duplicate", status=page.status)  # same content as another page
            return
        if result.status == "unchanged":
            await self._refresh_validators(document.id, known, page)
        async with self.app.db.pool.acquire() as conn:
            await self.app.documents.set_links(conn, document.id, self.job.source_id, page.links)
        outcome = self._outcome_after_recovery(target, result.status, document.created_at, document.updated_at)
        await self.frontier.finish_row(
            target.url,
            RowResult(
                "done",
                outcome=outcome,
                http_status=page.status,
                document_id=document.id,
                etag=page.etag,
                last_modified=page.last_modified,
                content_hash=document.content_hash,
                chunks=document.chunk_count,
                chunks_embedded=result.chunks_created,
            ),
        )
        self.ingested += 1
        await self._enqueue_links(target, page.links)

    async def _follow_redirect(
        self, row: FrontierRow, known: KnownDocument | None, final_url: str
    ) -> FrontierRow | None:
        """The frontier row that owns a redirect's target, or None when the row was settled here.

        The redirecting URL's own document (if the source held one) is deleted: it lives on under
        the final URL.
        """
        reason = self.refusal(final_url)
        if reason is None and not (await self.robots.policy(final_url)).can_fetch(final_url):
            reason = "robots"
        claimed = None if reason else await self.frontier.claim_redirect_target(final_url, row.depth)
        outcome = "deleted" if known is not None and await self._delete_document(known.id) else None
        if claimed is None:
            result = RowResult("skipped", outcome=outcome, skip_reason=reason or "duplicate", final_url=final_url)
        else:
            result = RowResult("redirected", outcome=outcome, final_url=final_url)
        await self.frontier.finish_row(row.url, result)
        return claimed

    def _document_metadata(self, row: FrontierRow, page: FetchResult) -> dict[str, Any]:
        return {
            "http_status": page.status,
            "content_type": page.content_type,
            "etag": page.etag,
            "last_modified": page.last_modified,
            "crawl_root": self.params.url,
            "crawl_job_id": str(self.job.id),
            "crawl_depth": row.depth,
        }

    async def _refresh_validators(self, document_id: UUID, known: KnownDocument | None, page: FetchResult) -> None:
        """Same content, new ETag/Last-Modified: store them so the next recrawl can ask for a 304."""
        if known is not None and (known.etag, known.last_modified) == (page.etag, page.last_modified):
            return
        await self.app.db.pool.execute(
            "UPDATE documents SET metadata = metadata || $2 WHERE id = $1",
            document_id,
            {"etag": page.etag, "last_modified": page.last_modified, "crawl_root": self.params.url},
        )

    def _outcome_after_recovery(self, row: FrontierRow, status: str, created: datetime, updated: datetime) -> str:
        """A page re-fetched after a worker died may have been stored by that worker: count what it did."""
        if status != "unchanged" or row.attempts <= 1:
            return status
        if created >= self.job.created_at:
            return "created"
        if updated >= self.job.created_at:
            return "updated"
        return status

    async def _enqueue_links(self, row: FrontierRow, links: list[str]) -> None:
        depth = row.depth + 1
        if depth > self.params.depth_limit:
            return
        await self.frontier.add((url, depth, "link", self.refusal(url)) for url in links)

    async def _delete_document(self, document_id: UUID) -> bool:
        try:
            await self.app.documents.delete(document_id)
        except NotFound:
            return False
        return True

    # ---------- the end ----------

    async def _complete(self) -> None:
        """Settle the frontier and record completed / failed with warnings."""
        await self.frontier.fail_stuck()
        left = await self.frontier.count("state = 'pending' AND linked")
        if left:
            await self.frontier.skip_pending("max-pages")
            self.warnings.append(
                f"max_pages ({self.params.max_pages}) reached: {left} discovered pages were not fetched."
            )
        if self.job.kind == "recrawl":
            await self._remove_unreached(complete=not left)
        crawled = await self.frontier.done_count()
        failed = await self.frontier.count("state = 'failed'")
        status, error = "completed", None
        if crawled == 0 and failed:
            first = await self.frontier.first_error()
            detail = f" First error: {first[0]}: {first[1]}" if first else ""
            status, error = "failed", short_error(f"No page could be crawled ({failed} failed).{detail}")
        elif crawled == 0 and not await self.frontier.count("state = 'gone'"):
            skipped = await self.frontier.skipped_summary()
            reasons = ", ".join(f"{k}: {v}" for k, v in skipped.items()) or "nothing found"
            self.warnings.append(f"Nothing was ingested: every page was skipped ({reasons}).")
        await self.app.jobs.finish(self.job.id, self.worker_id, status, error, self.warnings)
        logger.info("job %s %s: %d pages crawled, %d failed", self.job.id, status, crawled, failed)

    async def _remove_unreached(self, complete: bool) -> None:
        """Delete the documents of previous pages this recrawl did not find again (if it looked everywhere)."""
        unreached = await self.frontier.unreached_previous()
        if not unreached:
            return
        transient = await self.frontier.transient_failures()
        if not complete or transient:
            why = "max_pages was reached" if not complete else f"{transient} pages failed"
            self.warnings.append(
                f"{len(unreached)} previously crawled pages were not found again but were kept because {why}."
            )
            return
        for url in unreached:
            known = await self._known_document(url)
            deleted = known is not None and await self._delete_document(known.id)
            result = RowResult("gone", outcome="deleted" if deleted else None, error=PREVIOUS_GONE_ERROR)
            await self.frontier.finish_row(url, result)

    # ---------- cancel, stop, heartbeat ----------

    def _interrupt(self, reason: str) -> None:
        if not self.interrupt.is_set():
            self.interrupt_reason = reason
            self.interrupt.set()

    async def _watch(self) -> None:
        """Heartbeat, and turn cancel / stop / lost ownership into an interrupt (checked every 0.5 s)."""
        last_beat = time.monotonic()
        while not self.interrupt.is_set():
            await wait_any((self.cancel_event, self.stop), WATCH_SECONDS)
            if self.stop.is_set():
                self._interrupt("stop")
            elif self.cancel_event.is_set():
                self._interrupt("cancel")
            else:
                try:
                    last_beat = await self._beat_or_poll(last_beat)
                except (asyncpg.PostgresError, OSError) as exc:
                    logger.warning("job %s: heartbeat failed: %s", self.job.id, exc)

    async def _beat_or_poll(self, last_beat: float) -> float:
        if time.monotonic() - last_beat >= self.settings.job_heartbeat_seconds:
            beat = await self.app.jobs.heartbeat(self.job.id, self.worker_id)
            if not beat.owned:
                self._interrupt("lost")
            elif beat.cancel_requested:
                self._interrupt("cancel")
            return time.monotonic()
        if await self.app.db.pool.fetchval("SELECT cancel_requested FROM crawl_jobs WHERE id = $1", self.job.id):
            self._interrupt("cancel")
        return last_beat


async def wait_any(events: Iterable[asyncio.Event], timeout: float) -> None:
    """Return when any event is set or `timeout` seconds have passed."""
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)


async def run_job(app: Archivist, job: CrawlJob, worker_id: str, stop: asyncio.Event) -> None:
    """Run a claimed job; an unexpected error fails the job with a short message (logged in full)."""
    try:
        await CrawlRunner(app, job, worker_id, stop).run()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if unavailable_from(exc) is not None:  # the database blinked: hand the job back, never fail it
            await hand_back_when_possible(app, job, worker_id, exc)
            return
        logger.exception("job %s failed", job.id)
        try:
            await app.jobs.finish(
                job.id, worker_id, "failed", short_error(f"internal error: {type(exc).__name__}: {exc}")
            )
        except Exception:
            logger.exception("job %s: could not record the failure", job.id)


async def hand_back_when_possible(app: Archivist, job: CrawlJob, worker_id: str, exc: BaseException) -> None:
    """Requeue a job interrupted by a database outage (retrying for up to a minute); it resumes from its
    frontier on the next claim. If the database stays away, the stale heartbeat requeues it anyway."""
    logger.warning("job %s paused: the database is unavailable (%s)", job.id, type(exc).__name__)
    for _ in range(60):
        try:
            await app.jobs.release(job.id, worker_id)
            return
        except Exception as again:
            if unavailable_from(again) is None:
                raise
            await asyncio.sleep(1)
