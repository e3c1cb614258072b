"""Issue 21, point 9: recrawls keep their shape, and a crawl's page set does not depend on timing.

The fixture site is a tree: / links /p1, /p2, /p3, and each /pN links /pN/c1 .. /pN/c5 (19 pages). With
max_pages=10 a breadth-first crawl in discovery order holds /, the three /pN, /p1/c1..c5 and /p2/c1,
whatever finishes first. The crawls below run with one of the /pN pages slow and a process burning
CPU: on main, the pages of whichever /pN answered first took the budget, and a recrawl of the same
source reached new pages before known ones and kept both (the issue's 15 -> 17 documents).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import pytest_asyncio

from models.jobs import CrawlJob, CrawlRequest
from services.app import Archivist
from tests.conftest import make_settings
from tests.crawl.test_crawl_jobs import run_until_finished
from tests.support.fixture_site import FixtureSite, html_page

PARENTS = ["/p1", "/p2", "/p3"]
CHILDREN = {p: [f"{p}/c{i}" for i in range(1, 6)] for p in PARENTS}
BREADTH_FIRST_10 = {"/", *PARENTS, *CHILDREN["/p1"], "/p2/c1"}


@pytest_asyncio.fixture(scope="module")
async def crawl_app(database_url: str, files_dir: Path, embedder: Any) -> AsyncIterator[Archivist]:
    settings = make_settings(
        database_url, files_dir, crawl_delay_seconds=0, crawl_page_timeout=5.0, job_poll_seconds=0.1
    )
    app = await Archivist.open(settings, embedder)
    yield app
    await app.close()


@pytest.fixture
def tree() -> Iterator[FixtureSite]:
    site = FixtureSite(with_defaults=False).start()
    site.set_page("/", html_page("Tree home", ["The root of a small tree of pages."], [(p, p) for p in PARENTS]))
    for parent in PARENTS:
        links = [(c, c) for c in CHILDREN[parent]]
        site.set_page(parent, html_page(f"Branch {parent}", [f"Branch page {parent} of the tree."], links))
        for child in CHILDREN[parent]:
            site.set_page(child, html_page(f"Leaf {child}", [f"Leaf page {child}, distinct text {child}."]))
    try:
        yield site
    finally:
        site.stop()


@pytest.fixture
def busy_cpu() -> Iterator[None]:
    """A process burning one core for the duration of the test."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        burner.kill()
        burner.wait()


def slow_only(site: FixtureSite, slow: list[str], seconds: float = 0.8) -> None:
    for path in PARENTS:
        site.set_delay(path, seconds if path in slow else 0.0)


async def paths(app: Archivist, source_id: UUID) -> set[str]:
    rows = await app.db.pool.fetch("SELECT url FROM documents WHERE source_id = $1", source_id)
    return {"/" + r["url"].split("/", 3)[3] if r["url"].count("/") >= 3 else "/" for r in rows}


async def recrawl(app: Archivist, source_id: UUID, **overrides: Any) -> CrawlJob:
    started = await app.crawl.recrawl(CrawlRequest(source_id=source_id, **overrides))
    return await run_until_finished(app, started.job.id, timeout=120)


def page_requests(site: FixtureSite) -> list[str]:
    return [r.path for r in site.request_log if r.path not in {"/robots.txt", "/sitemap.xml", "/llms.txt"}]


@pytest.mark.usefixtures("owner")
async def test_page_set_and_recrawl_do_not_depend_on_timing(
    crawl_app: Archivist, tree: FixtureSite, busy_cpu: None
) -> None:
    slow_only(tree, ["/p1"])  # /p2 and /p3 finish first: their links are found first
    first = await run_until_finished(
        crawl_app,
        (
            await crawl_app.crawl.start(CrawlRequest(url=tree.url_for("/"), recursive=True, max_depth=3, max_pages=10))
        ).job.id,
        timeout=120,
    )
    assert first.status == "completed" and first.documents_created == 10
    assert await paths(crawl_app, first.source_id) == BREADTH_FIRST_10

    # Recrawled with other pages slow: the known pages are revisited first (conditional requests, 304
    # keeps them), and the budget is spent: nothing new, nothing dropped.
    slow_only(tree, ["/p2", "/p3"])
    tree.request_log.clear()
    again = await recrawl(crawl_app, first.source_id)
    assert again.status == "completed", again
    assert await paths(crawl_app, first.source_id) == BREADTH_FIRST_10
    assert (again.documents_created, again.documents_unchanged, again.documents_deleted) == (0, 10, 0)
    requested = page_requests(tree)
    assert set(requested) == BREADTH_FIRST_10, requested
    assert all("if-none-match" in tree.requests_for(p)[0].headers for p in BREADTH_FIRST_10)


@pytest.mark.usefixtures("owner")
async def test_recrawl_revisits_known_pages_first_then_spends_what_is_left(
    crawl_app: Archivist, tree: FixtureSite, busy_cpu: None
) -> None:
    first = await run_until_finished(
        crawl_app,
        (
            await crawl_app.crawl.start(CrawlRequest(url=tree.url_for("/"), recursive=True, max_depth=3, max_pages=10))
        ).job.id,
        timeout=120,
    )
    assert await paths(crawl_app, first.source_id) == BREADTH_FIRST_10

    # /p1/c3 is gone (404): its document goes, and the freed page of the budget takes the next new page.
    tree.remove_page("/p1/c3")
    slow_only(tree, ["/p1", "/p2"])
    tree.request_log.clear()
    job = await recrawl(crawl_app, first.source_id)
    assert job.status == "completed", job
    expected = (BREADTH_FIRST_10 - {"/p1/c3"}) | {"/p2/c2"}
    assert await paths(crawl_app, first.source_id) == expected
    assert (job.documents_created, job.documents_deleted) == (1, 1)
    requested = page_requests(tree)
    new = requested.index("/p2/c2")
    assert set(requested[:new]) == BREADTH_FIRST_10, requested  # every known page before the new one

    # max_pages lowered: the known pages beyond it (the last found) are removed, and the job says so.
    job = await recrawl(crawl_app, first.source_id, max_pages=8)
    assert job.status == "completed", job
    held = await paths(crawl_app, first.source_id)
    assert len(held) == 8 and held == expected - {"/p2/c1", "/p2/c2"}, held
    assert job.documents_deleted == 2 and job.skipped_by_reason["max-pages"] >= 2  # + the new pages not fetched
    assert any("were not revisited and were removed" in w and "/p2/c2" in w for w in job.warnings), job.warnings
