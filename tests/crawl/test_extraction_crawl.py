"""Crawled pages go through the page pipeline: article text only, link targets in the links table,
and pages stored by an older extractor are fetched in full and re-extracted on their next recrawl."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from models.jobs import CrawlRequest
from services.app import Archivist
from services.pages import EXTRACTOR_VERSION
from tests.conftest import make_settings
from tests.content.test_extraction_layouts import sphinx_page
from tests.crawl.test_crawl_jobs import crawl, run_until_finished
from tests.support.fixture_site import FixtureSite


@pytest_asyncio.fixture(scope="module")
async def crawl_app(database_url: str, files_dir: Path, embedder: Any) -> AsyncIterator[Archivist]:
    settings = make_settings(database_url, files_dir, crawl_delay_seconds=0, job_poll_seconds=0.1)
    app = await Archivist.open(settings, embedder)
    yield app
    await app.close()


@pytest.fixture
def site() -> Any:
    running = FixtureSite(with_defaults=False).start()
    running.set_page("/guide/brewing.html", sphinx_page())
    running.set_page(
        "/guide/grind.html", "<html><body><main><h1>Grind</h1><p>Burrs beat blades.</p></main></body></html>"
    )
    yield running
    running.stop()


@pytest.mark.usefixtures("owner")
async def test_crawled_page_keeps_article_and_links(crawl_app: Archivist, site: FixtureSite) -> None:
    job = await crawl(crawl_app, site.url_for("/guide/brewing.html"), recursive=True, max_depth=1, max_pages=5)
    row = await crawl_app.db.pool.fetchrow(
        "SELECT id, content, metadata FROM documents WHERE source_id = $1 AND url = $2",
        job.source_id,
        site.url_for("/guide/brewing.html"),
    )
    content = row["content"]
    assert content.startswith("# Brewing with a moka pot") and "## Grind size" in content
    for chrome in ("Skip to content", "Next chapter", "Search the docs", "Copyright 2031", "¶", "http"):
        assert chrome not in content
    assert row["metadata"]["extractor"] == EXTRACTOR_VERSION and row["metadata"]["main_content"] == "sphinx"
    links = {r["to_url"] for r in await crawl_app.db.pool.fetch(
        "SELECT to_url FROM document_links WHERE from_document_id = $1", row["id"]
    )}  # fmt: skip
    assert site.url_for("/guide/grind.html") in links  # the chrome "next" link still leads the crawl
    heading_paths = await crawl_app.db.pool.fetch(
        "SELECT heading_path FROM chunks WHERE document_id = $1 ORDER BY chunk_index", row["id"]
    )
    assert any("Grind size" in (r["heading_path"] or []) for r in heading_paths)


@pytest.mark.usefixtures("owner")
async def test_page_from_an_older_extractor_is_refetched_and_replaced(crawl_app: Archivist, site: FixtureSite) -> None:
    job = await crawl(crawl_app, site.url_for("/guide/brewing.html"), max_pages=1)
    url = site.url_for("/guide/brewing.html")
    # What an older extractor stored: chrome and link targets in the text, an ETag that still matches.
    old_text = "Site navigation [Next chapter](http://x/grind.html)\n\n# Brewing with a moka pot\n\nOld text."
    await crawl_app.db.pool.execute(
        "UPDATE documents SET content = $3, content_hash = 'old', metadata = metadata || '{\"extractor\": null}' "
        "WHERE source_id = $1 AND url = $2",
        job.source_id,
        url,
        old_text,
    )
    site.request_log.clear()
    again = await run_until_finished(
        crawl_app, (await crawl_app.crawl.recrawl(CrawlRequest(source_id=job.source_id))).job.id
    )
    assert "if-none-match" not in site.requests_for("/guide/brewing.html")[0].headers  # no 304 for old text
    assert again.documents_updated == 1
    row = await crawl_app.db.pool.fetchrow(
        "SELECT content, metadata FROM documents WHERE source_id = $1 AND url = $2", job.source_id, url
    )
    assert "Site navigation" not in row["content"] and "Fill the lower chamber" in row["content"]
    assert row["metadata"]["extractor"] == EXTRACTOR_VERSION
    # Now current: the next recrawl asks for a 304 and keeps the document.
    site.request_log.clear()
    third = await run_until_finished(
        crawl_app, (await crawl_app.crawl.recrawl(CrawlRequest(source_id=job.source_id))).job.id
    )
    assert "if-none-match" in site.requests_for("/guide/brewing.html")[0].headers
    assert third.documents_unchanged == 1 and third.documents_updated == 0


@pytest.mark.usefixtures("owner")
async def test_generated_index_pages_lead_the_crawl_but_are_not_stored(crawl_app: Archivist) -> None:
    def sphinx(title: str, rel_index: str, links: str) -> str:
        return (
            f'<html><head><title>{title}</title><link rel="index" href="{rel_index}" />'
            f'<link rel="search" href="search.html" /></head><body><div class="body" role="main">'
            f"<h1>{title}</h1><p>{title} explains otters and kelp at some length.</p>{links}</div></body></html>"
        )

    with FixtureSite(with_defaults=False) as site:
        links = '<a href="genindex.html">Index</a> <a href="hidden.html">Hidden</a>'
        site.set_page("/d/index.html", sphinx("Start", "genindex.html", links))
        site.set_page("/d/genindex.html", sphinx("Index", "#", '<a href="deep.html">deep</a>'))
        site.set_page("/d/deep.html", sphinx("Deep", "genindex.html", ""))
        site.set_page("/d/hidden.html", '<html><head><meta name="robots" content="noindex,nofollow"></head>'
                      '<body><p>Hidden <a href="never.html">never</a></p></body></html>')  # fmt: skip
        site.set_page("/d/never.html", sphinx("Never", "genindex.html", ""))
        job = await crawl(crawl_app, site.url_for("/d/index.html"), recursive=True, max_depth=5, max_pages=20)
        stored = {r["url"].rsplit("/", 1)[1] for r in await crawl_app.db.pool.fetch(
            "SELECT url FROM documents WHERE source_id = $1", job.source_id
        )}  # fmt: skip
        frontier = {r["url"].rsplit("/", 1)[1]: (r["state"], r["skip_reason"]) for r in await crawl_app.db.pool.fetch(
            "SELECT url, state, skip_reason FROM crawl_frontier WHERE job_id = $1", job.id
        )}  # fmt: skip
    assert stored == {"index.html", "deep.html"}  # deep.html was reached through the index page only
    assert frontier["genindex.html"] == frontier["hidden.html"] == ("skipped", "noindex")
    assert "never.html" not in frontier  # nofollow: the hidden page's links were not followed
