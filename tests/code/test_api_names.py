"""Names documented by API reference pages (services/pages/api_names.py) are recorded in the symbol
table, so a definition search finds the page and anchor that documents a name (issue 36, point 7)."""

from __future__ import annotations

from typing import Any

import pytest

from services.app import Archivist
from services.code.symbol_store import write_documented
from services.pages import extract_html
from tests.crawl.test_crawl_jobs import crawl
from tests.support.fixture_site import FixtureSite

SPHINX = """<html><head><title>asyncio tasks</title></head><body><div role="main"><h1>Tasks</h1>
<dl class="py class"><dt class="sig sig-object py" id="asyncio.TaskGroup">class asyncio.TaskGroup</dt>
<dd><p>An asynchronous context manager holding a group of tasks.</p>
<dl class="py method"><dt class="sig sig-object py" id="asyncio.TaskGroup.create_task">create_task(coro)</dt>
<dd><p>Create a task in this task group.</p></dd></dl></dd></dl>
<dl class="py function"><dt id="bad&lt;script&gt;">not a name</dt><dd><p>x</p></dd></dl>
</div></body></html>"""
MKDOCS = """<html><head><title>Client</title></head><body><main>
<div class="doc doc-object doc-class"><h2 id="httpx.Client" class="doc doc-heading">Client</h2>
<p>An HTTP client.</p></div></main></body></html>"""
RUSTDOC = """<html><head><meta name="generator" content="rustdoc"><title>Runtime</title></head><body>
<main><h1>Struct Runtime</h1><p>The runtime.</p><section id="method.block_on"><h4>pub fn block_on</h4></section>
<section id="method.spawn"><h4>pub fn spawn</h4></section></main></body></html>"""


def test_each_generator_names_what_it_documents() -> None:
    sphinx = extract_html(SPHINX, "https://docs.python.org/3/library/asyncio-task.html").metadata["api_names"]
    # each entry: [qualified name, anchor, kind, where the entry starts in the page's markdown]
    assert sphinx == [
        ["asyncio.TaskGroup", "asyncio.TaskGroup", "class", 11],
        ["asyncio.TaskGroup.create_task", "asyncio.TaskGroup.create_task", "method", 99],
    ]  # the id that is not a name is left out
    mkdocs = extract_html(MKDOCS, "https://www.python-httpx.org/api/").metadata["api_names"]
    assert mkdocs == [["httpx.Client", "httpx.Client", "class", 3]]
    rust = extract_html(RUSTDOC, "https://docs.rs/tokio/1.40.0/tokio/runtime/struct.Runtime.html")
    assert rust.metadata["api_names"] == [
        ["tokio::runtime::Runtime", "", "struct", 0],  # the page's own item: its top
        ["tokio::runtime::Runtime::block_on", "method.block_on", "method", 37],
        ["tokio::runtime::Runtime::spawn", "method.spawn", "method", 59],
    ]
    assert rust.markdown[37:].startswith("pub fn block_on") and rust.markdown[59:] == "pub fn spawn"
    assert "api_names" not in extract_html("<html><body><p>Prose.</p></body></html>").metadata


@pytest.mark.usefixtures("owner")
async def test_a_definition_search_returns_the_page_and_anchor(app: Archivist, embedder: Any) -> None:
    source = await app.sources.create(title="Python docs", source_type="api")
    url = "https://docs.python.org/3/library/asyncio-task.html"
    page = extract_html(SPHINX, url)
    result = await app.documents.ingest(source.id, page.title or "", page.markdown, "html", url)
    async with app.db.pool.acquire() as conn:
        await write_documented(conn, result.document.id, source.id, page.metadata["api_names"])
    found = await app.symbols.definitions("asyncio.TaskGroup", [source.id], 0, 20)
    assert [(h.qualified_name, h.anchor, h.url) for h in found.hits] == [
        ("asyncio.TaskGroup", "asyncio.TaskGroup", url)
    ]
    method = await app.symbols.definitions("TaskGroup.create_task", None, 0, 20)
    assert [h.kind for h in method.hits] == ["method"]
    async with app.db.pool.acquire() as conn:  # written again (a recrawl): replaced, not doubled
        await write_documented(conn, result.document.id, source.id, page.metadata["api_names"])
    assert (await app.symbols.definitions("asyncio.TaskGroup", None, 0, 20)).total == 1


@pytest.fixture
def site() -> Any:
    running = FixtureSite(with_defaults=False).start()
    running.set_page("/library/asyncio-task.html", SPHINX)
    yield running
    running.stop()


@pytest.mark.usefixtures("owner")
async def test_a_crawled_reference_page_records_its_names(app: Archivist, site: FixtureSite) -> None:
    crawl_app = await Archivist.open(app.settings.model_copy(update={"crawl_delay_seconds": 0}), app.embedder)
    try:
        job = await crawl(crawl_app, site.url_for("/library/asyncio-task.html"), max_pages=1)
    finally:
        await crawl_app.close()
    found = await app.symbols.definitions("asyncio.TaskGroup", [job.source_id], 0, 20)
    url = site.url_for("/library/asyncio-task.html")
    assert [(h.anchor, h.url, h.kind) for h in found.hits] == [("asyncio.TaskGroup", url, "class")]
    place = await app.db.pool.fetchrow(
        "SELECT s.char_start, d.content FROM code_symbols s JOIN documents d ON d.id = s.document_id "
        "WHERE s.qualified_name = 'asyncio.TaskGroup'"
    )
    assert place["content"][place["char_start"] :].startswith("class asyncio.TaskGroup**")  # the entry, as stored
    stored = await app.db.pool.fetchval("SELECT metadata FROM documents WHERE url = $1", url)
    assert "api_names" not in stored  # the names live in the symbol table, not in the page's metadata
