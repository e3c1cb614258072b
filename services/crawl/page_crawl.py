"""One page of a crawl job: robots check, (conditional) fetch, then store, keep, skip or fail it.

A stored HTML page extracted by an older version of the page pipeline (services.pages) is fetched
again without validators, so a 304 cannot keep its old text: the new extraction is compared by
content hash and, when it differs, the page is re-chunked and re-embedded.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from models.jobs import CrawlJob, CrawlParams
from services.code.symbol_store import write_documented
from services.core.errors import NotFound, ServiceError
from services.crawl.politeness import HostThrottle
from services.crawl.robots_cache import RobotsCache
from services.documents import DocumentService, page_content
from services.documents.specs import page_spec, page_spec_text
from services.documents.upkeep import KnownDocument
from services.fetchers.base import Fetcher, FetchResult
from services.flags.hidden import evidence
from services.jobs.frontier import Frontier, FrontierRow, RowResult
from services.jobs.run import short_error
from services.net.urls import normalize_url
from services.pages.api_names import API_NAMES
from services.pages.indexing import NOFOLLOW, NOINDEX

GONE_STATUSES = frozenset({404, 410})
NON_TEXT_PREFIX = "non-text content"
#: Page pipeline metadata stored with a crawled document.
PAGE_METADATA_KEYS = frozenset({"extractor", "main_content", "generator", "description", "language"})


class PageCrawler:
    """Crawls single frontier rows of one job; counts the pages it finished (`ingested`)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        job: CrawlJob,
        frontier: Frontier,
        robots: RobotsCache,
        throttle: HostThrottle,
        documents: DocumentService,
        refusal: Callable[[str], str | None],
    ) -> None:
        self.pool = pool
        self.job = job
        self.params: CrawlParams = job.crawl_params()
        self.frontier = frontier
        self.robots = robots
        self.throttle = throttle
        self.documents = documents
        self.refusal = refusal
        self.fetcher: Fetcher | None = None
        self.ingested = 0

    @property
    def source_id(self) -> UUID:
        """The source the crawl writes into (a crawl job always has one)."""
        assert self.job.source_id is not None, "a crawl job without a source"
        return self.job.source_id

    async def crawl(self, row: FrontierRow) -> None:
        """Fetch one claimed row and settle it."""
        if not (await self.robots.policy(row.url)).can_fetch(row.url):
            await self._skip(row.url, "robots")
            return
        known = await self.known_document(row.url)
        assert self.fetcher is not None
        async with self.throttle.slot(row.url):
            etag, last_modified = known.validators() if known else (None, None)
            page = await self.fetcher.fetch(row.url, etag=etag, last_modified=last_modified)
        if page.not_modified and known is not None:
            await self._keep_unchanged(row, known, page)
        elif not page.ok:
            await self._record_failure(row, known, page)
        else:
            await self._ingest_fetched(row, known, page)

    async def known_document(self, url: str) -> KnownDocument | None:
        return await self.documents.known(self.job.source_id, url)

    async def _skip(self, url: str, reason: str, known: KnownDocument | None = None, status: int | None = None) -> None:
        """Skip a page; a page the source held that may no longer be crawled loses its document."""
        outcome = "deleted" if known is not None and await self.delete_document(known.id) else None
        await self.frontier.finish_row(
            url, RowResult("skipped", outcome=outcome, skip_reason=reason, http_status=status)
        )

    async def _record_failure(self, row: FrontierRow, known: KnownDocument | None, page: FetchResult) -> None:
        if page.status in GONE_STATUSES and known is not None:
            deleted = await self.delete_document(known.id)
            result = RowResult(
                "gone", outcome="deleted" if deleted else None, http_status=page.status, error=f"HTTP {page.status}"
            )
            await self.frontier.finish_row(row.url, result)
        elif (page.error or "").startswith(NON_TEXT_PREFIX):
            await self._skip(row.url, "non-text", known, page.status)
        else:
            error = short_error(page.error or f"HTTP {page.status}")
            held = known.id if known is not None and row.known else None  # kept: it counts against max_pages
            result = RowResult("failed", error=error, http_status=page.status or None, document_id=held)
            await self.frontier.finish_row(row.url, result)
            if held is not None:
                self.ingested += 1

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
        # links first: a worker killed between the two steps must not leave a "done" page whose links were lost
        links = await self.pool.fetch("SELECT to_url FROM document_links WHERE from_document_id = $1", known.id)
        await self._enqueue_links(row, [r["to_url"] for r in links])
        await self.frontier.finish_row(row.url, result)
        self.ingested += 1

    async def _ingest_fetched(self, row: FrontierRow, known: KnownDocument | None, page: FetchResult) -> None:
        """A 2xx page: settle a redirect, then store the page under the URL it was finally served from."""
        target = row
        final_url = normalize_url(page.final_url or row.url) or row.url
        if final_url != row.url:
            claimed = await self._follow_redirect(row, known, final_url)
            if claimed is None:
                return
            target, known = claimed, await self.known_document(final_url)
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
        if page_spec_text(page) is not None and await self._stored_as_spec(target, known, page):
            return
        title, text, document_type = await page_content(page, self.documents.settings)
        if follow_only:
            await self._enqueue_links(target, page.links)
            await self._skip(target.url, "pattern", known, page.status)
            return
        if page.metadata.get(NOINDEX):  # e.g. Sphinx's genindex.html: its links lead on, its text is noise
            if not page.metadata.get(NOFOLLOW):
                await self._enqueue_links(target, page.links)
            await self._skip(target.url, "noindex", known, page.status)
            return
        metadata = self._document_metadata(target, page)
        result = await self.documents.ingest(  # keyword-searchable now; the backlog embeds it
            self.source_id,
            (title or target.url).strip()[:500],
            text,
            document_type,
            target.url,
            metadata,
            embed=False,
        )
        document = result.document
        if document.url != target.url:
            await self._skip(target.url, "duplicate", status=page.status)  # same content as another page
            await self._enqueue_links(target, page.links)  # its links still lead the crawl on
            return
        if result.status == "unchanged":
            await self._refresh_validators(document.id, known, page)
        async with self.pool.acquire() as conn:
            await self.documents.set_links(conn, document.id, self.source_id, page.links)
            await write_documented(conn, document.id, self.source_id, page.metadata.get(API_NAMES))
        outcome = self._outcome_after_recovery(target, result.status, document.created_at, document.updated_at)
        await self._enqueue_links(target, page.links)  # before "done", so a killed worker loses no links
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

    async def _stored_as_spec(self, target: FrontierRow, known: KnownDocument | None, page: FetchResult) -> bool:
        """An OpenAPI spec becomes one document per operation; other JSON/YAML is skipped as non-text.
        False for a text page that only looked like a spec: it is stored as text."""
        spec = await page_spec(page, self.documents.settings)
        if spec is None:
            if page.raw is None:
                return False
            await self._skip(target.url, "non-text", known, page.status)
            return True
        # no crawl_root: the documents live at "<spec url>#<operation>", which no crawl links to
        metadata = {"crawl_job_id": str(self.job.id), "openapi_crawl_root": self.params.url}
        outcome = await self.documents.ingest_spec(self.source_id, spec, target.url, metadata)
        overview = outcome.results[0]
        changed = outcome.count("created") + outcome.count("updated") + outcome.deleted
        status = overview.status if overview.status != "unchanged" or not changed else "updated"
        await self.frontier.finish_row(
            target.url,
            RowResult(
                "done",
                outcome=self._outcome_after_recovery(
                    target, status, overview.document.created_at, overview.document.updated_at
                ),
                http_status=page.status,
                document_id=overview.document.id,
                content_hash=overview.document.content_hash,
                chunks=overview.document.chunk_count,
                chunks_embedded=outcome.chunks_created,
            ),
        )
        self.ingested += 1
        return True

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
        claimed = None if reason else await self.frontier.claim_redirect_target(final_url, row)
        outcome = "deleted" if known is not None and await self.delete_document(known.id) else None
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
            **{k: v for k, v in page.metadata.items() if k in PAGE_METADATA_KEYS},
            **evidence(page.metadata),  # hidden-text marks for the injection flags (services/flags)
        }

    async def _refresh_validators(self, document_id: UUID, known: KnownDocument | None, page: FetchResult) -> None:
        """Same content, new ETag/Last-Modified (or extractor version): store them so the next recrawl
        can ask for a 304."""
        extractor = page.metadata.get("extractor")
        if known is not None and (known.etag, known.last_modified, known.extractor) == (
            page.etag,
            page.last_modified,
            extractor,
        ):
            return
        await self.documents.refresh_validators(
            document_id,
            {
                "etag": page.etag,
                "last_modified": page.last_modified,
                "crawl_root": self.params.url,
                **({"extractor": extractor} if extractor else {}),
            },
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
        await self.frontier.add(((url, depth, "link", self.refusal(url)) for url in links), row.rank)

    async def delete_document(self, document_id: UUID) -> bool:
        try:
            await self.documents.delete(document_id)
        except NotFound:
            return False
        return True
