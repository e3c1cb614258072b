"""Crawl jobs at the service level, against a real PostgreSQL and the fixture website on 127.0.0.1.

Covers the frontier (scope, patterns, depth, exact max_pages, robots, sitemap/llms discovery,
redirects, 404, timeouts, non-text), politeness (robots Crawl-delay), cancel, stop/hand-back,
recrawl counts, SSRF refusal, and a worker process SIGKILLed mid-crawl.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import pytest_asyncio
from pydantic import ValidationError

from models.jobs import CrawlJob, CrawlRequest
from services.app import Archivist, run_worker
from services.core.errors import Conflict, InvalidArgument, PermissionDenied
from tests.conftest import make_settings
from tests.content.test_parsers import make_pdf
from tests.support.fixture_site import FixtureSite, html_page

ROOT = Path(__file__).resolve().parents[2]
DISCOVERY_PATHS = {"/robots.txt", "/sitemap.xml", "/llms.txt"}
FULL_SITE_PAGES = {"/", "/docs/a", "/docs/b", "/sitemap-only", "/archive/old", "/docs/c", "/deep/1", "/deep/2"}


@pytest_asyncio.fixture(scope="module")
async def crawl_app(database_url: str, files_dir: Path, embedder: Any) -> AsyncIterator[Archivist]:
    """Fast crawl settings: no politeness delay, 1 s page timeout, quick heartbeats."""
    settings = make_settings(
        database_url,
        files_dir,
        crawl_delay_seconds=0,
        crawl_page_timeout=1.0,
        job_poll_seconds=0.1,
        job_heartbeat_seconds=0.5,
        job_stale_seconds=2.0,
    )
    app = await Archivist.open(settings, embedder)
    yield app
    await app.close()


@pytest_asyncio.fixture(scope="module")
async def strict_app(database_url: str, files_dir: Path, embedder: Any) -> AsyncIterator[Archivist]:
    """The default SSRF policy: private and loopback targets refused."""
    app = await Archivist.open(make_settings(database_url, files_dir, crawl_allow_private=False), embedder)
    yield app
    await app.close()


@pytest.fixture
def site() -> Any:
    with FixtureSite() as running:
        yield running


def slow_generated_site(pages: int, delay: float) -> FixtureSite:
    """A started site with only /gen/ pages (no robots, sitemap or llms.txt), each answering after `delay`."""
    generated = FixtureSite(with_defaults=False).start()
    generated.generate(pages)
    for path in list(generated.pages):
        generated.set_delay(path, delay)
    return generated


async def run_until_finished(app: Archivist, job_id: UUID, timeout: float = 60.0, worker: str = "test") -> CrawlJob:
    """Run an in-process worker until the job finishes."""
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(app, stop, worker))
    try:
        job = await app.jobs.wait(job_id, timeout, interval=0.1)
    finally:
        stop.set()
        await task
    assert job.finished, job
    return job


async def crawl(app: Archivist, url: str, **kwargs: Any) -> CrawlJob:
    started = await app.crawl.start(CrawlRequest(url=url, **kwargs))
    return await run_until_finished(app, started.job.id)


async def document_counts(app: Archivist, source_id: UUID) -> dict[str, int]:
    """Path -> number of documents with that URL in the source."""
    rows = await app.db.pool.fetch(
        "SELECT url, count(*) AS n FROM documents WHERE source_id = $1 GROUP BY url", source_id
    )
    return {_path(r["url"]): r["n"] for r in rows}


def _path(url: str) -> str:
    return "/" + url.split("/", 3)[3] if url.count("/") >= 3 else url


def page_requests(site: FixtureSite) -> list[str]:
    return [r.path for r in site.request_log if r.path not in DISCOVERY_PATHS]


# ------------------------------------------------------------------ crawling


@pytest.mark.usefixtures("owner")
async def test_recursive_crawl_stores_every_reachable_page_once(crawl_app: Archivist, site: FixtureSite) -> None:
    job = await crawl(crawl_app, site.url_for("/"), recursive=True, max_depth=2, max_pages=50)
    assert job.status == "completed_with_errors"  # two pages failed: a warning, never plain success
    assert (job.pages_crawled, job.pages_failed, job.pages_pending, job.pages_skipped) == (8, 2, 0, 3)
    assert job.skipped_by_reason == {"robots": 1, "non-text": 1, "off-scope": 1}
    assert (job.documents_created, job.documents_updated, job.documents_unchanged) == (8, 0, 0)
    assert await document_counts(crawl_app, job.source_id) == dict.fromkeys(FULL_SITE_PAGES, 1)
    errors = {_path(e.url): e.error for e in job.recent_errors}
    assert errors == {"/slow": "timeout", "/missing": "HTTP 404"}
    # robots.txt disallows /private/; depth 2 stops before /deep/3; the redirect's target is fetched once.
    assert site.requests_for("/private/secret") == []
    assert site.requests_for("/deep/3") == []
    assert len(site.requests_for("/docs/c")) == 1
    assert len(site.requests_for("/sitemap-only")) == 1  # found only through sitemap.xml
    chunks = await crawl_app.db.pool.fetchval(
        "SELECT sum(chunk_count) FROM documents WHERE source_id = $1", job.source_id
    )
    assert job.total_chunks == chunks > 0
    source = await crawl_app.sources.get(job.source_id)
    assert (source.title, source.source_type) == (f"127.0.0.1:{site.port}", "crawl")


@pytest.mark.usefixtures("owner")
async def test_crawled_pages_are_linked_and_searchable(crawl_app: Archivist, site: FixtureSite) -> None:
    job = await crawl(crawl_app, site.url_for("/"), recursive=True, max_depth=1, max_pages=50)
    ids = {
        _path(r["url"]): r["id"]
        for r in await crawl_app.db.pool.fetch("SELECT id, url FROM documents WHERE source_id = $1", job.source_id)
    }
    links = await crawl_app.documents.links(ids["/docs/a"])
    assert links is not None
    outlinks = {_path(link["url"]): link["document_id"] for link in links["outlinks"]}
    assert outlinks == {"/docs/b": ids["/docs/b"], "/": ids["/"]}
    assert {_path(link["url"]) for link in links["backlinks"]} == {"/", "/docs/b"}
    outcome = await crawl_app.search.search("espresso grind size and crema", job.source_id, 3, "hybrid")
    assert _path(outcome.hits[0].url or "") == "/docs/a"


@pytest.mark.usefixtures("owner")
async def test_single_page_when_not_recursive(crawl_app: Archivist, site: FixtureSite) -> None:
    job = await crawl(crawl_app, site.url_for("/docs/a#section"), max_pages=50, recursive=False)
    assert job.params.url == site.url_for("/docs/a")  # fragment dropped
    assert (job.status, job.pages_crawled, job.pages_skipped, job.pages_failed) == ("completed", 1, 0, 0)
    assert await document_counts(crawl_app, job.source_id) == {"/docs/a": 1}
    assert page_requests(site) == ["/docs/a"]
    assert site.requests_for("/sitemap.xml") == []


@pytest.mark.usefixtures("owner")
async def test_max_pages_is_exact(crawl_app: Archivist, site: FixtureSite) -> None:
    job = await crawl(crawl_app, site.url_for("/"), recursive=True, max_depth=2, max_pages=3)
    assert job.pages_crawled == 3
    counts = await document_counts(crawl_app, job.source_id)
    assert len(counts) == 3 and set(counts.values()) == {1} and "/" in counts
    assert job.skipped_by_reason.get("max-pages", 0) > 0
    assert any("max_pages (3) reached" in w for w in job.warnings)


@pytest.mark.usefixtures("owner")
async def test_max_depth_limits_link_following(crawl_app: Archivist, site: FixtureSite) -> None:
    job = await crawl(crawl_app, site.url_for("/"), recursive=True, max_depth=1, max_pages=50)
    counts = await document_counts(crawl_app, job.source_id)
    assert "/deep/1" in counts and "/deep/2" not in counts
    assert site.requests_for("/deep/2") == []


@pytest.mark.usefixtures("owner")
async def test_exclude_patterns_are_applied_before_fetching(crawl_app: Archivist, site: FixtureSite) -> None:
    job = await crawl(
        crawl_app, site.url_for("/"), recursive=True, max_depth=2, exclude_patterns=["/archive/*", "/deep/*", "slow"]
    )
    assert job.skipped_by_reason["pattern"] == 3
    assert site.requests_for("/archive/old") == [] and site.requests_for("/deep/1") == []
    assert site.requests_for("/slow") == []
    assert "/archive/old" not in await document_counts(crawl_app, job.source_id)


@pytest.mark.usefixtures("owner")
async def test_include_patterns_keep_only_matching_pages(crawl_app: Archivist, site: FixtureSite) -> None:
    job = await crawl(crawl_app, site.url_for("/"), recursive=True, max_depth=2, include_patterns=["/docs/*"])
    assert await document_counts(crawl_app, job.source_id) == {"/docs/a": 1, "/docs/b": 1}
    # The start page is read for its links but not stored: it does not match the patterns.
    assert job.skipped_by_reason == {"pattern": 9, "off-scope": 1}
    assert len(site.requests_for("/")) == 1


@pytest.mark.usefixtures("owner")
async def test_robots_crawl_delay_is_enforced(crawl_app: Archivist, site: FixtureSite) -> None:
    site.set_page("/robots.txt", site.robots_txt("Crawl-delay: 0.5"), "text/plain")
    await crawl(crawl_app, site.url_for("/"), recursive=True, max_depth=1, max_pages=4, exclude_patterns=["slow"])
    starts = sorted(r.time for r in site.request_log if r.path not in DISCOVERY_PATHS)
    assert len(starts) >= 4
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    # start times are spaced by the crawler; arrival times at the fixture server jitter under load,
    # so the whole span is the robust measure and each single gap gets some slack
    assert starts[-1] - starts[0] >= 0.5 * len(gaps) - 0.1, gaps
    assert min(gaps) >= 0.3, gaps


@pytest.mark.usefixtures("owner")
async def test_markdown_text_and_pdf_pages_are_ingested(crawl_app: Archivist, site: FixtureSite) -> None:
    manual = make_pdf(["Calibrating the telescope mirror takes a steady hand."], "Telescope Manual")
    site.set_page("/formats/manual.pdf", manual, "application/pdf")
    microscope = make_pdf(["Focusing the microscope objective needs fine adjustment."], "Microscope Manual")
    site.set_page("/formats/download", microscope, "application/pdf")
    site.set_page("/formats/notes.md", "# Field Notes\n\nHerons wait motionless in the shallows.\n", "text/markdown")
    site.set_page("/formats/plain.txt", "Plain text about tidal bores on the Severn.", "text/plain")
    site.set_page("/formats/data.bin", bytes(range(256)), "application/octet-stream")
    names = ("manual.pdf", "download", "notes.md", "plain.txt", "data.bin")
    site.set_page("/formats/", html_page("Formats", ["Documents in several formats."], [(n, n) for n in names]))
    job = await crawl(crawl_app, site.url_for("/formats/"), recursive=True, max_depth=1, scope="under-path")
    assert (job.pages_crawled, job.pages_failed, job.skipped_by_reason["non-text"]) == (5, 0, 1)
    rows = await crawl_app.db.pool.fetch(
        "SELECT url, title, document_type FROM documents WHERE source_id = $1", job.source_id
    )
    kinds = {_path(r["url"]): (r["title"], r["document_type"]) for r in rows}
    assert kinds["/formats/manual.pdf"] == ("Telescope Manual", "pdf")
    assert kinds["/formats/download"] == ("Microscope Manual", "pdf")
    assert kinds["/formats/notes.md"] == ("Field Notes", "markdown")
    assert kinds["/formats/plain.txt"][1] == "text"
    assert kinds["/formats/"][1] == "html"
    assert set(kinds) == {
        "/formats/",
        "/formats/manual.pdf",
        "/formats/download",
        "/formats/notes.md",
        "/formats/plain.txt",
    }
    assert site.requests_for("/docs/a") == []  # seeded from the sitemap but outside the start folder


@pytest.mark.usefixtures("owner")
async def test_job_that_stores_nothing_because_of_errors_fails(crawl_app: Archivist, site: FixtureSite) -> None:
    job = await crawl(crawl_app, site.url_for("/missing"), recursive=False)
    assert job.status == "failed"
    assert job.error is not None and "HTTP 404" in job.error and "/missing" in job.error
    assert job.pages_failed == 1 and job.pages_crawled == 0


@pytest.mark.usefixtures("owner")
async def test_job_that_skips_everything_completes_with_a_warning(crawl_app: Archivist, site: FixtureSite) -> None:
    job = await crawl(crawl_app, site.url_for("/private/secret"), recursive=False)
    assert (job.status, job.pages_crawled, job.skipped_by_reason) == ("completed", 0, {"robots": 1})
    assert any("Nothing was ingested" in w and "robots: 1" in w for w in job.warnings)
    assert site.requests_for("/private/secret") == []


# ------------------------------------------------------------------ validation and safety


async def test_private_targets_are_refused_by_default(strict_app: Archivist, site: FixtureSite) -> None:
    before = await strict_app.db.pool.fetchval("SELECT count(*) FROM crawl_jobs")
    for url in (site.url_for("/"), "http://169.254.169.254/latest/meta-data/", "http://localhost:9/"):
        with pytest.raises(PermissionDenied) as info:
            await strict_app.crawl.start(CrawlRequest(url=url))
        assert "ARCHIVIST_CRAWL_ALLOW_PRIVATE" in info.value.suggestion
    with pytest.raises(InvalidArgument):
        await strict_app.crawl.start(CrawlRequest(url="ftp://example.com/file"))
    assert await strict_app.db.pool.fetchval("SELECT count(*) FROM crawl_jobs") == before


@pytest.mark.usefixtures("owner")
async def test_worker_with_default_policy_refuses_a_queued_private_job(
    crawl_app: Archivist, strict_app: Archivist, site: FixtureSite
) -> None:
    """Queued where private targets are allowed, the job carries that right: a worker whose settings
    refuse private targets leaves it queued (for one that allows them), fetching nothing."""
    started = await crawl_app.crawl.start(CrawlRequest(url=site.url_for("/")))
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(strict_app, stop, "strict"))
    await asyncio.sleep(1.0)
    stop.set()
    await task
    job = await strict_app.jobs.get(started.job.id)
    assert (job.status, job.attempts) == ("queued", 0)
    assert page_requests(site) == []
    cancelled, _ = await crawl_app.jobs.cancel(job.id)  # leave the queue as it was for the next tests
    assert cancelled.status == "cancelled"


async def test_arguments_are_validated_and_capped(crawl_app: Archivist) -> None:
    request = CrawlRequest(url="HTTP://Example.COM:80/a/../b#frag", recursive=True, max_depth=9, max_pages=1000)
    params, notes = crawl_app.crawl.build_params(request)
    assert (params.url, params.max_depth, params.max_pages) == ("http://example.com/b", 5, 100)
    assert len(notes) == 2
    bad_values: list[dict[str, Any]] = [
        {"url": None},
        {"url": "example.com"},
        {"url": "https://example.com", "max_pages": 0},
        {"url": "https://example.com", "max_depth": -1},
        {"url": "https://example.com", "scope": "everywhere"},
        {"url": "https://example.com", "include_patterns": ["x" * 301]},
    ]
    for values in bad_values:
        with pytest.raises(InvalidArgument):
            crawl_app.crawl.build_params(CrawlRequest(**values))
    with pytest.raises(ValidationError):  # a wrong type is refused where the request is built
        CrawlRequest(url="https://example.com", include_patterns="docs")  # type: ignore[arg-type]


# ------------------------------------------------------------------ queue, cancel, stop


@pytest.mark.usefixtures("owner")
async def test_queued_job_is_claimed_once_released_and_cancelled(crawl_app: Archivist, site: FixtureSite) -> None:
    started = await crawl_app.crawl.start(CrawlRequest(url=site.url_for("/"), title="Claim test"))
    with pytest.raises(Conflict):
        await crawl_app.crawl.recrawl(CrawlRequest(source_id=started.job.source_id))  # a crawl is already queued
    first, second = await asyncio.gather(crawl_app.jobs.claim("worker-a"), crawl_app.jobs.claim("worker-b"))
    claimed = [claim.job for claim in (first, second) if claim is not None]
    assert [job.id for job in claimed] == [started.job.id]
    await crawl_app.jobs.release(started.job.id, claimed[0].worker_id or "")
    assert (await crawl_app.jobs.get(started.job.id)).status == "queued"
    job, was_active = await crawl_app.jobs.cancel(started.job.id)
    assert (job.status, was_active) == ("cancelled", True)
    _, was_active = await crawl_app.jobs.cancel(started.job.id)
    assert was_active is False
    assert page_requests(site) == []


@pytest.mark.usefixtures("owner")
async def test_cancel_stops_a_running_crawl_within_two_seconds(crawl_app: Archivist) -> None:
    site = slow_generated_site(12, delay=0.6)
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(crawl_app, stop, "cancel-test"))
    try:
        started = await crawl_app.crawl.start(
            CrawlRequest(url=site.url_for("/gen/"), recursive=True, max_depth=5, max_pages=50)
        )
        job = started.job
        while job.pages_crawled < 2:
            job = await crawl_app.jobs.wait(job.id, 0.2, interval=0.1)
            assert not job.finished
        began = time.monotonic()
        job, was_active = await crawl_app.jobs.cancel(job.id)
        elapsed = time.monotonic() - began
        assert was_active and job.status == "cancelled" and elapsed < 2.0, (job.status, elapsed)
        requests_at_cancel = len(site.request_log)
        await asyncio.sleep(1.0)
        assert len(site.request_log) == requests_at_cancel  # nothing fetched after the cancel
        counts = await document_counts(crawl_app, job.source_id)
        assert len(counts) >= job.pages_crawled >= 2 and set(counts.values()) == {1}
        assert job.pages_pending > 0
    finally:
        stop.set()
        await worker
        site.stop()


@pytest.mark.usefixtures("owner")
async def test_cancel_is_prompt_while_discovery_files_are_slow(crawl_app: Archivist, site: FixtureSite) -> None:
    for path in DISCOVERY_PATHS:
        site.set_delay(path, 5.0)  # each discovery fetch would time out after 1 s: seeding takes 3 s
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(crawl_app, stop, "seed-cancel"))
    try:
        job = (await crawl_app.crawl.start(CrawlRequest(url=site.url_for("/"), recursive=True))).job
        while job.status != "running":
            job = await crawl_app.jobs.wait(job.id, 0.1, interval=0.05)
        began = time.monotonic()
        job, _ = await crawl_app.jobs.cancel(job.id)
        assert job.status == "cancelled" and time.monotonic() - began < 1.5
        assert page_requests(site) == []
    finally:
        stop.set()
        await worker


@pytest.mark.usefixtures("owner")
async def test_stopping_a_worker_hands_its_job_to_the_next_one(crawl_app: Archivist) -> None:
    site = slow_generated_site(10, delay=0.4)
    try:
        started = await crawl_app.crawl.start(
            CrawlRequest(url=site.url_for("/gen/"), recursive=True, max_depth=5, max_pages=50)
        )
        stop = asyncio.Event()
        worker = asyncio.create_task(run_worker(crawl_app, stop, "first"))
        job = started.job
        while job.pages_crawled < 2:
            job = await crawl_app.jobs.wait(job.id, 0.2, interval=0.1)
        stop.set()
        await worker
        handed_back = await crawl_app.jobs.get(job.id)
        assert (handed_back.status, handed_back.worker_id) == ("queued", None)
        for path in list(site.pages):
            site.set_delay(path, 0)
        job = await run_until_finished(crawl_app, job.id, worker="second")
        assert (job.status, job.pages_crawled, job.documents_created) == ("completed", 11, 11)
        assert set((await document_counts(crawl_app, job.source_id)).values()) == {1}
    finally:
        site.stop()


# ------------------------------------------------------------------ recrawl


@pytest.mark.usefixtures("owner")
async def test_recrawl_reports_exact_changes(crawl_app: Archivist, site: FixtureSite) -> None:
    site.set_delay("/slow", 0)
    first = await crawl(crawl_app, site.url_for("/"), recursive=True, max_depth=2, max_pages=50)
    expected = FULL_SITE_PAGES | {"/slow"}
    assert first.documents_created == len(expected) == 9
    unchanged_id = await crawl_app.db.pool.fetchval(
        "SELECT id FROM documents WHERE source_id = $1 AND url = $2", first.source_id, site.url_for("/deep/1")
    )
    chunk_ids = await crawl_app.db.pool.fetch("SELECT id FROM chunks WHERE document_id = $1 ORDER BY id", unchanged_id)

    # The site changes: /docs/a is rewritten, /docs/b is removed (404), /archive/old is no longer linked.
    site.set_page(
        "/docs/a",
        html_page(
            "Brewing Espresso",
            ["Pre-infusion wets the puck with low pressure before the full shot."],
            [("/docs/b", "Bees")],
        ),
    )
    site.remove_page("/docs/b")
    home_links = [(p, p) for p in ("/docs/a", "/docs/b", "/missing", "/slow", "/redirect", "/deep/1")]
    site.set_page("/", html_page("Fixture Handbook Home", ["The handbook, reorganised."], home_links))
    site.request_log.clear()

    started = await crawl_app.crawl.recrawl(CrawlRequest(source_id=first.source_id))
    job = await run_until_finished(crawl_app, started.job.id)
    # /missing and /slow fail again: the recrawl ran to its end with errors
    assert (job.kind, job.status, job.params) == ("recrawl", "completed_with_errors", first.params)
    assert (job.documents_created, job.documents_updated, job.documents_unchanged, job.documents_deleted) == (
        0,
        2,
        5,
        2,
    )
    assert job.pages_crawled == 7
    counts = await document_counts(crawl_app, job.source_id)
    assert counts == dict.fromkeys(expected - {"/docs/b", "/archive/old"}, 1)
    # Unchanged pages were answered 304 to a conditional request and not re-embedded.
    assert "if-none-match" in site.requests_for("/deep/1")[0].headers
    assert (
        await crawl_app.db.pool.fetch("SELECT id FROM chunks WHERE document_id = $1 ORDER BY id", unchanged_id)
        == chunk_ids
    )
    # Known pages are revisited first (issue 21, point 9); no link leads to /archive/old any more: removed.
    assert len(site.requests_for("/archive/old")) == 1
    outcome = await crawl_app.search.search("pre-infusion puck pressure", job.source_id, 1, "vector")
    assert _path(outcome.hits[0].url or "") == "/docs/a"

    again = await run_until_finished(crawl_app, (await crawl_app.crawl.recrawl(CrawlRequest(job_id=job.id))).job.id)
    assert (again.documents_created, again.documents_updated, again.documents_deleted) == (0, 0, 0)
    assert again.documents_unchanged == 7


@pytest.mark.usefixtures("owner")
async def test_recrawl_needs_a_crawled_source(crawl_app: Archivist) -> None:
    source = await crawl_app.sources.create("Never crawled")
    with pytest.raises(InvalidArgument):
        await crawl_app.crawl.recrawl(CrawlRequest(source_id=source.id))
    with pytest.raises(InvalidArgument):
        await crawl_app.crawl.recrawl(CrawlRequest())


@pytest.mark.usefixtures("owner")
async def test_list_filters_and_pages_newest_first(crawl_app: Archivist) -> None:
    everything = await crawl_app.jobs.list(per_page=20)
    assert everything.total_count >= 10
    created = [job.created_at for job in everything.items]
    assert created == sorted(created, reverse=True)
    completed = await crawl_app.jobs.list(status="completed", per_page=20)
    assert completed.items and all(job.status == "completed" for job in completed.items)
    one_source = everything.items[0].source_id
    by_source = await crawl_app.jobs.list(source_id=one_source)
    assert all(job.source_id == one_source for job in by_source.items)
    first_page = await crawl_app.jobs.list(page=1, per_page=1)
    assert first_page.has_more and len(first_page.items) == 1
    with pytest.raises(InvalidArgument):
        await crawl_app.jobs.list(status="sleeping")


# ------------------------------------------------------------------ worker crash


@pytest.mark.usefixtures("owner")
async def test_killed_worker_process_job_resumes_without_duplicates_or_losses(
    crawl_app: Archivist, database_url: str, files_dir: Path, embedder: Any
) -> None:
    """A worker process SIGKILLed mid-crawl: another worker resumes the job and every page is stored once.

    Nothing depends on timing: the doomed worker finishes levels 0-2 (/gen/, /gen/0../gen/5) and is
    killed while it waits on level-3 pages that answer only after the kill; the rescuer fetches with the
    default page timeout (crawl_app's 1 s one failed pages the loaded test process served late: 29/31).
    """
    site = FixtureSite(with_defaults=False).start()
    site.generate(30)
    deep = [f"/gen/{i}" for i in range(6, 30)]  # level 3 of the 5-ary tree: answered only after the kill
    for path in deep:
        site.set_delay(path, 600)  # until site.stop() wakes the handler
    log_path = files_dir / "worker_proc.log"
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "ARCHIVIST_DATA_DIR": str(files_dir.parent / "data"),
        "ARCHIVIST_ALLOWED_PATHS": str(files_dir),
        "ARCHIVIST_CRAWL_ALLOW_PRIVATE": "true",
        "ARCHIVIST_CRAWL_DELAY_SECONDS": "0",
        "ARCHIVIST_CRAWL_PAGE_TIMEOUT": "600",  # the level-3 fetches are still waiting when it dies
        "ARCHIVIST_JOB_HEARTBEAT_SECONDS": "0.5",
        "ARCHIVIST_JOB_POLL_SECONDS": "0.2",
    }
    started = await crawl_app.crawl.start(
        CrawlRequest(url=site.url_for("/gen/"), recursive=True, max_depth=5, max_pages=100)
    )
    job_id = started.job.id
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "support" / "crawl_worker_proc.py"), "doomed"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while await frontier_states(crawl_app, job_id) != {"done": 7, "fetching": "some"}:
            assert proc.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, log_path.read_text()[-3000:]
            await asyncio.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    orphaned = await crawl_app.jobs.get(job_id)
    assert (orphaned.status, orphaned.worker_id, orphaned.pages_crawled) == ("running", "doomed", 7)
    for path in deep:
        site.set_delay(path, 0)
    rescuer = await Archivist.open(
        make_settings(
            database_url,
            files_dir,
            crawl_delay_seconds=0,
            job_poll_seconds=0.1,
            job_heartbeat_seconds=0.5,
            job_stale_seconds=2.0,  # the doomed worker's heartbeat goes stale: its job is claimed again
        ),
        embedder,
    )
    try:
        job = await run_until_finished(rescuer, job_id, worker="rescuer")
    finally:
        await rescuer.close()
        site.stop()
    assert (job.status, job.attempts, job.worker_id) == ("completed", 2, "rescuer")
    assert any("Resumed" in w for w in job.warnings)
    assert (job.pages_crawled, job.documents_created, job.pages_failed, job.pages_pending) == (31, 31, 0, 0)
    counts = await document_counts(crawl_app, job.source_id)
    assert counts == dict.fromkeys(["/gen/", *(f"/gen/{i}" for i in range(30))], 1)


async def frontier_states(app: Archivist, job_id: UUID) -> dict[str, int | str]:
    """How many of the job's pages are done, and whether any is being fetched ("some")."""
    rows = await app.db.pool.fetch(
        "SELECT state, count(*) AS n FROM crawl_frontier WHERE job_id = $1 GROUP BY state", job_id
    )
    states = {r["state"]: r["n"] for r in rows}
    return {"done": states.get("done", 0), "fetching": "some" if states.get("fetching") else "none"}
