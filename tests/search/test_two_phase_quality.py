"""Ranking quality while chunks wait for their vector (issue 18), and the fully-embedded path untouched.

A small corpus where the question's words are common (each in about a sixth of the chunks, over the
5 % `keyword_max_term_frequency` that drops them from a fully-embedded search's keyword leg) except
one rare word that only a distractor page repeats. With nothing embedded the keyword leg is all a
search has: it must keep the common words and find the page that has them all. Once embedded, the
SQL and its parameters are exactly what they were before pending chunks had their own term limit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import pytest_asyncio

from services.access.scope import Scope, use_scope
from services.app import Archivist
from services.documents import NewDocument
from services.search import pending
from services.search.base import HIT_COLUMNS
from services.search.bm25 import BM25_TOPK_LEG
from services.search.hybrid import CONVEX_FUSION, HYBRID_SQL, HybridSearch
from services.search.legs import code_filter

QUESTION = "match text with a regular expression and extract the matching part"
TARGET = "Pattern Matching"
COMMON = ("regular", "expression", "match", "text")
FILLERS = 36
FILLER_LINE = "The harbour keeper notes the tides, the lantern hours and the ferry timetable for visitors. "


def corpus() -> list[NewDocument]:
    """The target (every common word), a distractor (the one rare word, three times) and fillers,
    each common word in six of them."""
    docs = [
        NewDocument(
            TARGET,
            f"# {TARGET}\n\nA regular expression can match text: the substring function returns the portion of "
            "the text that the regular expression pattern matched, and a match can be tested with the tilde.",
            "markdown",
        ),
        NewDocument(
            "Date Fields",
            "# Date Fields\n\nextract pulls a field such as the year out of a timestamp. extract returns a double "
            "precision value; extract also works on intervals.",
            "markdown",
        ),
    ]
    for i in range(FILLERS):
        word = COMMON[i // 6] if i < 6 * len(COMMON) else "quiet"
        body = f"{FILLER_LINE}Filler {i} mentions the word {word} once. {FILLER_LINE}"
        docs.append(NewDocument(f"Harbour notes {i}", f"# Harbour notes {i}\n\n{body}", "markdown"))
    return docs


class SpyPool:
    """The pool, recording every `fetch` (the hybrid query is one)."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pool, name)

    async def fetch(self, sql: str, *args: Any) -> Any:
        self.calls.append((sql, args))
        return await self.pool.fetch(sql, *args)

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        """A connection whose `fetch` is recorded too (the vector legs run on one, services/search/breadth.py)."""
        async with self.pool.acquire() as conn:
            yield SpyConnection(conn, self.calls)


class SpyConnection:
    def __init__(self, conn: Any, calls: list[tuple[str, tuple[Any, ...]]]) -> None:
        self.conn = conn
        self.calls = calls

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)

    async def fetch(self, sql: str, *args: Any) -> Any:
        self.calls.append((sql, args))
        return await self.conn.fetch(sql, *args)


class SpyDatabase:
    def __init__(self, db: Any) -> None:
        self.pool = SpyPool(db.pool)
        self.fts_config = db.fts_config
        self.settings = db.settings


@pytest_asyncio.fixture(scope="module")
async def sources(app: Archivist) -> dict[str, Any]:
    """The same corpus twice: one source embedded, one left pending (no vector yet)."""
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        embedded, _ = await app.sources.get_or_create("quality embedded")
        pending, _ = await app.sources.get_or_create("quality pending")
        await app.documents.ingest_many(embedded.id, corpus(), embed=True)
        await app.documents.ingest_many(pending.id, corpus(), embed=False)
        mostly, _ = await app.sources.get_or_create("quality mostly embedded")
        await app.documents.ingest_many(mostly.id, corpus(), embed=True)
        await app.db.pool.execute(  # one weak match ("text" once) still waits for its vector
            "UPDATE chunks c SET embedding = NULL FROM documents d "
            "WHERE d.id = c.document_id AND c.source_id = $1 AND d.title = 'Harbour notes 18'",
            mostly.id,
        )
        return {"embedded": embedded.id, "pending": pending.id, "mostly": mostly.id}


@pytest.mark.parametrize("fusion", ["convex", "rrf"])
@pytest.mark.parametrize("scan_max", [pending.PENDING_SCAN_MAX, 0])  # from the pending chunks / the postings
@pytest.mark.parametrize("postings", [1000, 0])  # impact-ordered / every posting
@pytest.mark.usefixtures("owner")
async def test_pending_chunks_rank_by_the_questions_common_words(
    app: Archivist,
    sources: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    fusion: str,
    scan_max: int,
    postings: int,
) -> None:
    monkeypatch.setattr(pending, "PENDING_SCAN_MAX", scan_max)
    monkeypatch.setattr(app.settings, "hybrid_fusion", fusion)
    monkeypatch.setattr(app.settings, "bm25_postings_per_term", postings)
    outcome = await app.search.search(QUESTION, source_id=sources["pending"], match_count=5)
    assert outcome.pending_embeddings == 2 + FILLERS  # one chunk a document, none embedded
    titles = [h.document_title for h in outcome.hits]
    assert titles[0] == TARGET, titles  # before: only "extract" was searched, the target was not found
    assert "Date Fields" in titles and outcome.hits[0].match_type == "keyword"


@pytest.mark.usefixtures("owner")
async def test_fully_embedded_search_keeps_todays_sql_and_terms(app: Archivist, sources: dict[str, Any]) -> None:
    """Passes on main too: no pending chunk in scope, the same query with the same parameters (as one
    statement; tests/search/test_parallel_legs.py shows the legs run apart rank the same)."""
    settings = app.settings.model_copy(update={"hybrid_parallel_legs": False})
    hybrid = HybridSearch(SpyDatabase(app.db), settings)  # type: ignore[arg-type]
    app.search._strategies["hybrid"] = hybrid
    try:
        outcome = await app.search.search(QUESTION, source_id=sources["embedded"], match_count=5)
    finally:
        app.search._strategies.pop("hybrid", None)
    assert outcome.pending_embeddings == 0
    sql, args = [c for c in hybrid.db.pool.calls if c[0].lstrip().startswith("WITH vec")][-1]
    today = HYBRID_SQL.format(keyword_leg=BM25_TOPK_LEG, fusion=CONVEX_FUSION, hit_columns=HIT_COLUMNS, vec_filter="")
    today = code_filter(today, code_only=False)  # search_type="code" marks, dropped: the SQL of main
    assert sql == today
    assert args[3] == ["extract"]  # the common words stay out of a fully-embedded keyword leg
    assert outcome.hits[0].document_title == TARGET  # the vector leg carries the meaning


@pytest.mark.parametrize("fusion", ["convex", "rrf"])
@pytest.mark.usefixtures("owner")
async def test_a_few_pending_chunks_are_set_against_the_embedded_ones(
    app: Archivist, sources: dict[str, Any], monkeypatch: pytest.MonkeyPatch, fusion: str
) -> None:
    """A weak pending match is scored on the scale of every candidate, not of the pending ones alone
    (where it would be the best, score 1.0, above a page both legs rank first)."""
    monkeypatch.setattr(app.settings, "hybrid_fusion", fusion)
    outcome = await app.search.search(QUESTION, source_id=sources["mostly"], match_count=5)
    assert outcome.pending_embeddings == 1
    embedded = await app.search.search(QUESTION, source_id=sources["embedded"], match_count=5)
    titles = [h.document_title for h in outcome.hits]
    assert titles[0] == embedded.hits[0].document_title != "Harbour notes 18", titles
    weak = [h for h in outcome.hits if h.document_title == "Harbour notes 18"]
    assert all(h.score < outcome.hits[0].score for h in weak)
