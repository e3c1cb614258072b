"""Documented names are evidence in hybrid search (issue 36, point 7): real pages through the real page
pipeline, real embeddings, real PostgreSQL.

* A query naming an identifier an API reference page documents ranks the chunk holding its entry first,
  over a tutorial that repeats the name (which the two-leg fusion prefers).
* A query with no identifier, or naming one no page in scope documents, ranks exactly as without the leg.
* The leg stays inside the searched sources.
* The page pipeline records where each entry starts, without changing the page's text.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from services.access.scope import Scope, use_scope
from services.app import Archivist
from services.code.symbol_store import write_documented
from services.pages import extract_html, pipeline
from services.pages.api_places import MarkApiNames, PlaceApiNames
from services.search.names import identifiers

PROSE = (
    "The event loop runs tasks one step at a time, switching between them whenever one awaits. "
    "Coroutines declared with async def are scheduled by wrapping them in tasks. "
)
ENTRIES = [
    ("asyncio.run", "function", "Execute the coroutine and return the result, managing the event loop for you."),
    ("asyncio.gather", "function", "Run awaitable objects concurrently and aggregate their results in order."),
    ("asyncio.TaskGroup", "class", "An asynchronous context manager holding a group of tasks; await on exit."),
    ("asyncio.timeout", "function", "An asynchronous context manager limiting the time spent waiting on something."),
]
API_PAGE = (
    "<html><head><title>Coroutines and Tasks</title></head><body><div role='main'><h1>Coroutines and Tasks</h1>"
    + "".join(f"<p>{PROSE * 3}</p>" for _ in range(3))
    + "".join(
        f"<dl class='py {kind}'><dt class='sig sig-object py' id='{name}'><em class='property'>{kind}</em> "
        f"{name}<a class='headerlink' href='#{name}'>¶</a></dt><dd><p>{(text + ' ') * 4}</p>"
        f"<p>{PROSE * 2}</p></dd></dl>"
        for name, kind, text in ENTRIES
    )
    + "</div></body></html>"
)
API_URL = "https://docs.example.org/library/asyncio-task.html"
TUTORIAL = (
    "# Structured concurrency with asyncio.TaskGroup\n\n"
    "asyncio.TaskGroup groups tasks: with asyncio.TaskGroup you start tasks and asyncio.TaskGroup waits for them. "
    "Prefer asyncio.TaskGroup over gather; asyncio.TaskGroup cancels the rest when one fails."
)


@pytest.fixture(scope="module")
async def pages(app: Archivist) -> dict[str, Any]:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        reference = await app.sources.create(title="Python reference")
        page = extract_html(API_PAGE, API_URL)
        stored = await app.documents.ingest(reference.id, page.title or "", page.markdown, "html", API_URL)
        async with app.db.pool.acquire() as conn:
            await write_documented(conn, stored.document.id, reference.id, page.metadata["api_names"])
        tutorials = await app.sources.create(title="Tutorials")
        await app.documents.create_from_text(tutorials.id, TUTORIAL, "TaskGroup tutorial")
        return {"reference": reference, "tutorials": tutorials, "page": page}


@pytest.fixture(scope="module")
async def without_leg(app: Archivist) -> AsyncIterator[Archivist]:
    """The same database searched with the name leg off (hybrid_name_weight 0): the two-leg ranking."""
    other = await Archivist.open(app.settings.model_copy(update={"hybrid_name_weight": 0.0}), app.embedder)
    yield other
    await other.close()


def _ranked(outcome: Any) -> list[tuple[str, str]]:
    return [(h.document_title, h.text[:60]) for h in outcome.hits]


@pytest.mark.usefixtures("owner")
@pytest.mark.parametrize("query", ["asyncio.TaskGroup", "TaskGroup", "how do I cancel an asyncio.TaskGroup?"])
async def test_the_entry_documenting_a_name_ranks_first(
    app: Archivist, without_leg: Archivist, pages: dict[str, Any], query: str
) -> None:
    sources = [str(pages["reference"].id), str(pages["tutorials"].id)]
    before = await without_leg.search.search(query, None, 5, "hybrid", source_ids=sources)
    assert before.hits[0].document_title == "TaskGroup tutorial", _ranked(before)  # the name repeated wins
    outcome = await app.search.search(query, None, 5, "hybrid", source_ids=sources)
    top = outcome.hits[0]
    assert top.document_title == "Coroutines and Tasks", _ranked(outcome)
    assert "* asyncio.TaskGroup**" in top.text, top.text
    assert 0 < top.score <= 1.0
    reranked = await app.search.search(query, None, 5, "rerank", source_ids=sources)  # its first stage too
    assert any("* asyncio.TaskGroup**" in h.text for h in reranked.hits[:3]), _ranked(reranked)


@pytest.mark.usefixtures("owner")
@pytest.mark.parametrize(
    ("query", "searched"),
    [
        ("how does the event loop switch between tasks", None),  # prose: no identifier
        ("asyncio.EventLoop", "reference"),  # a name no page documents
        ("TaskGroup", "tutorials"),  # documented, but only outside the searched source
        ("asyncio.gather", "tutorials"),
    ],
)
async def test_no_documented_name_in_scope_means_no_leg(
    app: Archivist, without_leg: Archivist, pages: dict[str, Any], query: str, searched: str | None
) -> None:
    source = pages[searched].id if searched else None
    with_leg = await app.search.search(query, source, 10, "hybrid")
    plain = await without_leg.search.search(query, source, 10, "hybrid")
    assert [(h.chunk_id, h.score) for h in with_leg.hits] == [(h.chunk_id, h.score) for h in plain.hits]


def test_identifier_shaped_words() -> None:
    assert identifiers("asyncio.TaskGroup") == [["asyncio", "TaskGroup"]]
    assert identifiers("`json.dumps()` vs json.dump?") == [["json", "dumps"], ["json", "dump"]]
    assert identifiers("tokio::spawn") == [["tokio", "spawn"]]
    assert identifiers("groupby") == [["groupby"]]  # a bare word alone is a name
    assert identifiers("how do I use select_related with TaskGroup") == [["select_related"], ["TaskGroup"]]
    assert identifiers("how do tasks run concurrently") == []  # prose: no leg, no lookup
    assert identifiers("3.11 changes") == []


def test_the_pipeline_records_where_each_entry_starts_without_changing_the_text() -> None:
    page = extract_html(API_PAGE, API_URL)
    names = page.metadata["api_names"]
    assert [n[0] for n in names] == [name for name, _, _ in ENTRIES]
    for (name, kind, _), (_, _, _, offset) in zip(ENTRIES, names, strict=True):
        assert page.markdown[offset:].startswith(f"{kind}* {name}**"), page.markdown[offset : offset + 40]
    unmarked = tuple(s for s in pipeline.HTML_STEPS if s not in (MarkApiNames, PlaceApiNames))
    original = pipeline.HTML_STEPS
    try:
        pipeline.HTML_STEPS = unmarked
        assert extract_html(API_PAGE, API_URL).markdown == page.markdown
    finally:
        pipeline.HTML_STEPS = original
    # text that already holds the marker character is not marked: no offsets, the text untouched
    odd = extract_html(API_PAGE.replace("<h1>", "<h1>\ue000"), API_URL)
    assert [n[3] for n in odd.metadata["api_names"]] == [None] * len(ENTRIES)
    assert "\ue000" in odd.markdown


@pytest.mark.usefixtures("owner")
async def test_a_profile_confines_the_leg(app: Archivist, without_leg: Archivist, pages: dict[str, Any]) -> None:
    """Searching as a profile of the tutorials only, the reference page's entry is neither lifted nor brought in."""
    from models.search import SearchQuery

    await app.profiles.create("tutorials-only", "the tutorials", [pages["tutorials"].id])
    asked = SearchQuery(query="asyncio.TaskGroup", profile="tutorials-only", search_type="hybrid")
    with_leg = await app.queries.run(asked)
    plain = await without_leg.queries.run(asked)
    assert {h.document_title for h in with_leg.outcome.hits} == {"TaskGroup tutorial"}
    assert [(h.chunk_id, h.score) for h in with_leg.outcome.hits] == [(h.chunk_id, h.score) for h in plain.outcome.hits]
    everything = await app.queries.run(SearchQuery(query="asyncio.TaskGroup", search_type="hybrid"))
    assert everything.outcome.hits[0].document_title == "Coroutines and Tasks"  # as the owner: lifted
