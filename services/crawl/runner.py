"""Runs one crawl job: seeding, scheduling pages through a fetch/extract -> embed pipeline, recrawl
rules, cancel / stop / heartbeat.

The frontier (services/jobs/frontier.py) holds every URL the job has seen, with its state, and hands
them out in an order that does not depend on timing. A worker that dies leaves rows in `fetching`;
whoever resumes the job puts them back to `pending`; ingestion is an upsert, so nothing is stored twice.

A recrawl keeps the source's shape: it first revisits the pages the source holds from this crawl
(conditional requests: a 304 keeps the page), then follows new links with the budget left (a known
page kept after a failed fetch counts too). Known pages beyond max_pages are removed and named in the
warnings; known pages nothing leads to any more are removed if the crawl looked everywhere, else kept.

Two-phase indexing: a page's chunks are stored without vectors, so the page is keyword-searchable as
soon as it is fetched, extracted and chunked; the embedding backlog (services/documents/backlog.py,
run by every worker) embeds them meanwhile, in batches that span pages, so the crawl never waits for
the embedder. Once every page is settled the job embeds what is left of its own chunks (helping the
backlog runners) and only then completes: a completed crawl is fully embedded.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace

import asyncpg

from models.jobs import ended_status
from services.core.errors import ServiceError
from services.core.memory import Trimmer, trim_async
from services.core.settings import Settings
from services.crawl.discovery import discover
from services.crawl.page_crawl import PageCrawler
from services.crawl.politeness import HostThrottle
from services.crawl.robots_cache import RobotsCache
from services.documents import DocumentService
from services.fetchers import create_fetcher
from services.jobs.frontier import Frontier, FrontierRow, RowResult
from services.jobs.queue import JobQueue
from services.jobs.rights import honoured_settings
from services.jobs.run import Claim, JobRun, short_error
from services.jobs.sources import remove_if_empty
from services.net import credentials
from services.net.credentials import SiteCredentials
from services.net.urls import in_scope, matches_patterns

logger = logging.getLogger(__name__)

PIPELINE_FACTOR = 3  # pages in flight per fetch slot: the rest are being extracted, chunked or stored
PREVIOUS_GONE_ERROR = "no longer linked from the site"
MAX_LISTED = 10  # known pages named in a warning


@dataclass(frozen=True)
class CrawlTools:
    """What a crawl uses besides its queue: settings, the database pool (its frontier), documents (store,
    delete, embed), and the process's per-host throttle."""

    settings: Settings
    pool: asyncpg.Pool
    documents: DocumentService
    throttle: HostThrottle


class CrawlRunner(JobRun):
    """Runs one claimed crawl (the lifecycle is JobRun's)."""

    login: SiteCredentials | None = None  # headers for the start host (a crawl behind a login); never logged

    def __init__(self, claim: Claim, queue: JobQueue, tools: CrawlTools) -> None:
        """Reads the login's variables (InvalidArgument naming one that is not set)."""
        super().__init__(claim, queue, tools.settings.job_heartbeat_seconds)
        job = claim.job
        params = self.params = job.crawl_params()
        self.login = credentials.resolve(params.url, params.headers, params.cookies, params.auth_hosts)
        self.settings = honoured_settings(tools.settings, job.rights)
        self.pool = tools.pool
        self.documents = tools.documents
        self.frontier = Frontier(tools.pool, job.id, ordered=True, on_done=tools.documents.touch_fetched)
        if job.attempts > 1:
            self.warnings.append(
                f"Resumed by worker {self.worker_id} after the previous worker stopped (attempt {job.attempts})."
            )
        self.throttle = tools.throttle
        self.robots = RobotsCache(self.settings, self.throttle, self.warnings, self.login)
        self.unfetched: int | None = None  # discovered pages beyond max_pages, once the frontier is settled
        self.pages = PageCrawler(
            tools.pool, job, self.frontier, self.robots, self.throttle, tools.documents, self.refusal
        )
        self.trimmer = Trimmer()  # hands freed page memory back to the system every few pages

    # ---------- the job ----------

    async def work(self) -> None:
        """Seed, crawl, settle the frontier and embed the rest (each step stops at an interrupt)."""
        recovered = await self.frontier.recover()
        if recovered:
            logger.info(
                "job %s: %d pages left mid-fetch by a previous worker go back to pending", self.job.id, recovered
            )
        self.pages.ingested = await self.frontier.held_count()
        self.pages.fetcher = await asyncio.to_thread(create_fetcher, self.settings, self.login)
        if await self.unless_interrupted(self._seed_once()):
            await self._crawl()
            if not self.interrupt.is_set():
                await self._settle_frontier()
                await self.unless_interrupted(self._embed_rest())

    async def close(self) -> None:
        if self.pages.fetcher is not None:
            await self.pages.fetcher.close()
        await trim_async()

    async def _settle_frontier(self) -> int:
        """After the last page: rows left mid-fetch by a dead task fail, and discovered pages beyond
        max_pages are skipped (so the status shows every page settled while the embedding finishes).
        Returns how many discovered pages were not fetched."""
        await self.frontier.fail_stuck()
        left = await self.frontier.count("state = 'pending' AND linked")
        if left:
            await self.frontier.skip_pending("max-pages")
            self.warnings.append(
                f"max_pages ({self.params.max_pages}) reached: {left} discovered pages were not fetched."
            )
        self.unfetched = left
        return left

    async def _embed_rest(self) -> None:
        """Phase two's tail: embed the job's chunks still pending (the backlog runners work on them too)."""
        documents = await self.frontier.written_documents()
        embedded = await self.documents.backlog.drain(documents, self.interrupt)
        if embedded:
            logger.info("job %s: embedded the last %d chunks of its pages", self.job.id, embedded)

    # ---------- seeding ----------

    async def _seed_once(self) -> None:
        """Start URL, sitemaps, llms.txt (services/crawl/discovery.py) and (recrawl) the previous pages;
        once per job, idempotent."""
        if await self.queue.seeded(self.job.id):
            return
        start = self.params.url
        await self.frontier.add([(start, 0, "start", None)])
        if self.job.kind == "recrawl":
            await self.frontier.add_known(
                await self.frontier.known_pages(self.source_id, self.params.url, self.params.depth_limit)
            )
        if self.params.depth_limit >= 1:
            discovered = await discover(self.params.url, self.robots, self.settings, self.login)
            await self.frontier.add(((url, 1, origin, self.refusal(url)) for url, origin in discovered), [-1])
        await self.queue.mark_seeded(self.job.id)

    def refusal(self, url: str) -> str | None:
        """Why a discovered URL is not fetched (off-scope, pattern), or None."""
        if not in_scope(url, self.params.url, self.params.scope):
            return "off-scope"
        if not matches_patterns(url, self.params.include_patterns, self.params.exclude_patterns):
            return "pattern"
        return None

    # ---------- scheduling ----------

    async def _crawl(self) -> None:
        """Keep PIPELINE_FACTOR x `crawl_concurrency` pages in flight (fetching itself is bounded by the
        throttle), never more than the remaining page budget."""
        in_flight: dict[asyncio.Task[None], FrontierRow] = {}
        interrupted = asyncio.create_task(self.interrupt.wait())
        try:
            while not self.interrupt.is_set():
                await self._schedule(in_flight)
                if not in_flight:
                    break
                done, _ = await asyncio.wait([*in_flight, interrupted], return_when=asyncio.FIRST_COMPLETED)
                for task in [t for t in in_flight if t in done]:
                    in_flight.pop(task)
                    self._log_task_failure(task)
                    await self.trimmer.tick()
        finally:
            interrupted.cancel()
            for task in in_flight:
                task.cancel()
            await asyncio.gather(interrupted, *in_flight, return_exceptions=True)

    async def _schedule(self, in_flight: dict[asyncio.Task[None], FrontierRow]) -> None:
        budget = self.params.max_pages - self.pages.ingested - len(in_flight)
        slots = min(PIPELINE_FACTOR * self.settings.crawl_concurrency - len(in_flight), budget)
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
            await self.pages.crawl(row)
        except asyncio.CancelledError:
            raise
        except ServiceError as exc:
            await self.frontier.finish_row(row.url, RowResult("failed", error=short_error(exc.message)))
        except Exception as exc:
            logger.exception("job %s: unexpected error crawling %s", self.job.id, row.url)
            await self.frontier.finish_row(
                row.url, RowResult("failed", error=f"unexpected error: {type(exc).__name__}")
            )

    # ---------- the end ----------

    async def complete(self) -> None:
        """Settle the frontier (if not yet) and record completed / failed with warnings."""
        left = self.unfetched if self.unfetched is not None else await self._settle_frontier()
        if self.job.kind == "recrawl":
            await self._remove_unreached(complete=not left)
        crawled = await self.frontier.done_count()
        failed = await self.frontier.count("state = 'failed'")
        status, error = ended_status(failed), None
        if crawled == 0 and failed:
            first = await self.frontier.first_error()
            detail = f" First error: {first[0]}: {first[1]}" if first else ""
            status, error = "failed", short_error(f"No page could be crawled ({failed} failed).{detail}")
        elif crawled == 0 and not await self.frontier.count("state = 'gone'"):
            skipped = await self.frontier.skipped_summary()
            reasons = ", ".join(f"{k}: {v}" for k, v in skipped.items()) or "nothing found"
            self.warnings.append(f"Nothing was ingested: every page was skipped ({reasons}).")
        finished = await self.queue.finish(self.job.id, self.worker_id, status, error, self.warnings)
        if finished and status == "failed":  # every page failed: the source it created for itself goes
            await remove_if_empty(self.pool, self.job.id)
        logger.info("job %s %s: %d pages crawled, %d failed", self.job.id, status, crawled, failed)

    async def _remove_unreached(self, complete: bool) -> None:
        """Known pages beyond max_pages are removed (and listed); known pages no link led to again are
        removed if the recrawl looked everywhere, else kept with a warning."""
        dropped = await self.frontier.known_urls("state = 'skipped' AND skip_reason = 'max-pages'")
        for url in dropped:
            await self._remove_known(url, RowResult("skipped", skip_reason="max-pages"))
        if dropped:
            listed = ", ".join(dropped[:MAX_LISTED]) + (", …" if len(dropped) > MAX_LISTED else "")
            self.warnings.append(
                f"max_pages ({self.params.max_pages}) is below the pages this source held: {len(dropped)} known "
                f"pages were not revisited and were removed: {listed}"
            )
        unreached = await self.frontier.known_urls("NOT reached AND state = 'done'")
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
            await self._remove_known(url, RowResult("gone", error=PREVIOUS_GONE_ERROR))

    async def _remove_known(self, url: str, result: RowResult) -> None:
        known = await self.pages.known_document(url)
        deleted = known is not None and await self.pages.delete_document(known.id)
        await self.frontier.finish_row(url, replace(result, outcome="deleted" if deleted else None))
