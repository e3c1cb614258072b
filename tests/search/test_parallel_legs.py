"""Hybrid legs on two connections at once (services/search/parallel.py) rank exactly as one statement.

The same fused rows (ids, order, scores, leg ranks) with `hybrid_parallel_legs` on and off, over 120
queries of a fixture corpus (names, code, a source filter, both fusions, both keyword modes, chunks
waiting for their vectors), the same hybrid and keyword hits through the search service, and a
tenant's scope narrows both legs.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from models import SearchHit
from services.access.scope import Scope, use_scope
from services.app import Archivist
from services.search import SearchService
from services.search.base import SearchRequest
from services.search.breadth import SearchBreadth
from services.search.hybrid import HybridSearch
from services.search.keyword import KeywordSearch

WORDS = (
    "kiln glaze pottery clay wheel sourdough ferment starter tensor gradient socket thread async "
    "queue retry backoff index vacuum replica shard the a of and"
).split()
NAMES = ["mock.patch.object", "asyncio.TaskGroup", "dirs_exist_ok", "tokio::spawn", "os.path.join"]
QUERY_COUNT = 120


def _text(rng: random.Random) -> str:
    weights = [1.0 / (i + 1) for i in range(len(WORDS))]
    words = rng.choices(WORDS, weights, k=rng.randint(4, 40))
    if rng.random() < 0.3:
        words += rng.choices(NAMES, k=rng.randint(1, 2))
    return " ".join(words) + "."


def _queries() -> list[str]:
    rng = random.Random(7)
    out = []
    for i in range(QUERY_COUNT):
        words = rng.sample(WORDS, rng.randint(1, 4))
        if i % 5 == 0:
            words.append(rng.choice(NAMES))
        out.append(" ".join(words))
    return out


@pytest.fixture(scope="module")
async def corpus(app: Archivist) -> dict[str, Any]:
    rng = random.Random(37)
    sources = []
    with use_scope(Scope.owner()):
        for s in range(3):
            source = await app.sources.create(f"legs {s}")
            sources.append(source.id)
            for i in range(30):
                kind = "code" if s == 2 and i % 2 else "markdown"
                await app.documents.ingest(source.id, f"d{s}-{i}", _text(rng), kind, f"legs{s}:{i}")
    queries = _queries()
    return {"sources": sources, "queries": queries, "vectors": await _vectors(app, queries)}


def _hybrid(app: Archivist, parallel: bool, **overrides: Any) -> HybridSearch:
    return HybridSearch(app.db, app.settings.model_copy(update={"hybrid_parallel_legs": parallel, **overrides}))


async def _rows(search: HybridSearch, request: SearchRequest, limit: int) -> list[tuple]:
    return [
        (r["chunk_id"], r["rrf"], r["vrank"], r["krank"], r["similarity"])
        for r in await search.fused_rows(request, limit)
    ]


async def _assert_same(app: Archivist, queries: list[str], vectors: dict, **variant: Any) -> int:
    """Every query's fused rows equal with the legs apart and together; returns how many rows compared."""
    request_args = {k: variant.pop(k) for k in ("source_ids", "keyword_mode", "code_only", "pending") if k in variant}
    together, apart = _hybrid(app, False, **variant), _hybrid(app, True, **variant)
    compared = 0
    for query in queries:
        request = SearchRequest(
            query,
            vectors[query],
            20,
            request_args.get("source_ids"),
            pending_embeddings=request_args.get("pending", 0),
            keyword_mode=request_args.get("keyword_mode", "any"),
            code_only=request_args.get("code_only", False),
        )
        want = await _rows(together, request, 20)
        got = await _rows(apart, request, 20)
        assert got == want, (query, variant, request_args)
        compared += len(want)
    return compared


async def _vectors(app: Archivist, queries: list[str]) -> dict:
    from services.embeddings import embed_query_async

    return {q: await embed_query_async(app.embedder, q) for q in queries}


@pytest.mark.usefixtures("owner")
async def test_parallel_legs_rank_as_one_statement(app: Archivist, corpus: dict[str, Any]) -> None:
    queries, vectors = corpus["queries"], corpus["vectors"]
    assert await _assert_same(app, queries, vectors) > 10 * len(queries)  # the defaults: convex, BM25 top-k
    few = queries[::4]
    await _assert_same(app, few, vectors, hybrid_fusion="rrf")
    await _assert_same(app, few, vectors, source_ids=[corpus["sources"][1]])
    await _assert_same(app, few, vectors, keyword_mode="all")
    await _assert_same(app, few, vectors, code_only=True)
    await _assert_same(app, few, vectors, bm25_postings_per_term=0)
    await _assert_same(app, few, vectors, keyword_ranking="ts_rank")
    await _assert_same(app, few, vectors, keyword_ranking="ts_rank", hybrid_fusion="rrf")


@pytest.mark.usefixtures("owner")
async def test_parallel_legs_with_chunks_waiting_for_vectors(app: Archivist, corpus: dict[str, Any]) -> None:
    source = await app.sources.create("legs pending")
    rng = random.Random(3)
    for i in range(12):
        await app.documents.ingest(source.id, f"p{i}", _text(rng), "markdown", f"pending:{i}", embed=False)
    pending = await app.search.pending_embeddings(None)
    assert pending > 0
    queries, vectors = corpus["queries"][::6], corpus["vectors"]
    for fusion in ("convex", "rrf"):
        await _assert_same(app, queries, vectors, hybrid_fusion=fusion, pending=pending)
    await _assert_same(app, queries, vectors, keyword_ranking="ts_rank", pending=pending)
    await app.sources.delete(source.id)


class EmbeddedOnce:
    """The session's embedder, each query embedded once by it (`vectors`, shared): the services compared
    run a query hundreds of times, and a query's vector is the same every time (what differs between
    them is how the legs run, never the vector)."""

    def __init__(self, embedder: Any, vectors: dict[str, Any]) -> None:
        self.embedder, self.vectors = embedder, vectors

    def embed_query(self, text: str) -> Any:
        if text not in self.vectors:
            self.vectors[text] = self.embedder.embed_query(text)
        return self.vectors[text]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.embedder, name)


def _service(app: Archivist, parallel: bool, vectors: dict[str, Any] | None = None) -> SearchService:
    settings = app.settings.model_copy(update={"hybrid_parallel_legs": parallel})
    embedder = app.embedder if vectors is None else EmbeddedOnce(app.embedder, vectors)
    return SearchService(app.db, app.sources, embedder, settings, lambda: None)  # type: ignore[arg-type, return-value]


def _hits(hits: list[SearchHit]) -> list[tuple]:
    return [(h.chunk_id, h.score, h.similarity, h.match_type) for h in hits]


@pytest.mark.usefixtures("owner")
async def test_search_service_hits_identical(app: Archivist, corpus: dict[str, Any]) -> None:
    """Hybrid hits with the legs apart or together, keyword hits with the terms read beside the
    embedding or by the leg: the same ids, order and scores."""
    queries, vectors = corpus["queries"], corpus["vectors"]
    apart, together = _service(app, True, vectors), _service(app, False, vectors)
    keyword = KeywordSearch(_hybrid(app, True))
    for query in queries:
        want = await together.search(query, match_count=10)
        got = await apart.search(query, match_count=10)
        assert _hits(got.hits) == _hits(want.hits), query
        early = await keyword.hybrid.main_terms(query)
        read_early = await keyword.search(SearchRequest(query, vectors[query], 30, query_terms=early))
        read_late = await keyword.search(SearchRequest(query, vectors[query], 30))
        assert _hits(read_early) == _hits(read_late), query


async def test_a_tenant_scope_narrows_both_legs(app: Archivist, corpus: dict[str, Any]) -> None:
    """A tenant confined to one source: every candidate of either leg is from that source, though the
    other sources hold the query's words and nearest vectors (the owner sees them)."""
    mine = corpus["sources"][0]
    tenant = Scope.of_profiles(frozenset({mine}), read_only=True, profiles=["p"], who="tenant")
    apart, together = _service(app, True, corpus["vectors"]), _service(app, False, corpus["vectors"])
    others = 0
    for query in corpus["queries"][:30]:
        with use_scope(Scope.owner()):
            everyone = await apart.search(query, match_count=20)
        others += sum(h.source_id != mine for h in everyone.hits)
        with use_scope(tenant):
            got = await apart.search(query, match_count=20)
            want = await together.search(query, match_count=20)
        assert {h.source_id for h in got.hits} <= {mine}, query
        assert _hits(got.hits) == _hits(want.hits), query
    assert others > 0


async def test_statements_are_planned_for_their_parameters(app: Archivist) -> None:
    """A generic plan (PostgreSQL's choice from a prepared statement's sixth run) summed BM25 terms in
    another order: at a million chunks 4 of 15 searches then ranked chunks of equal text differently as
    one statement than with the legs apart (services/core/database.py `session_settings`)."""
    assert await app.db.pool.fetchval("SHOW plan_cache_mode") == "force_custom_plan"


@pytest.mark.usefixtures("owner")
async def test_shared_snapshot_reads_one_committed_state(app: Archivist) -> None:
    """Both connections of `shared_snapshot` keep reading the state they began with after a delete
    commits, so legs run apart and the fusion after them see the same chunks."""
    source = await app.sources.create("legs snapshot")
    doc = await app.documents.ingest(source.id, "Egret", "An egret waits in the reeds.", "markdown")
    count = "SELECT count(*) FROM chunks WHERE document_id = $1"
    async with SearchBreadth.of(app.db).shared_snapshot() as (first, second):
        assert second is not None
        held = await first.fetchval(count, doc.document.id)
        assert held > 0
        await app.documents.delete(doc.document.id)
        assert await app.db.pool.fetchval(count, doc.document.id) == 0
        assert await first.fetchval(count, doc.document.id) == held
        assert await second.fetchval(count, doc.document.id) == held


@pytest.mark.usefixtures("owner")
async def test_updates_never_hide_a_document_from_legs_run_apart(app: Archivist) -> None:
    """A document updated over and over while hybrid searches run with the legs apart: every search
    finds it (legs and fusion on separate snapshots lost it whenever an update committed between them)."""
    source = await app.sources.create("legs updates")
    doc = await app.documents.ingest(source.id, "Heron", "The heron fishes at the weir at dawn.", "markdown")
    search = _service(app, True)
    running = True

    async def updater() -> int:
        n = 0
        while running:
            n += 1
            text = f"The heron fishes at the weir at dawn. Visit {n} saw {n % 7} herons."
            await app.documents.update(doc.document.id, content=text, embed=True)
        return n

    task = asyncio.create_task(updater())
    missing = 0
    try:
        for _ in range(150):
            found = await search.search("heron weir dawn", source_id=source.id, match_count=5)
            missing += not any(h.document_id == doc.document.id for h in found.hits)
    finally:
        running = False
        updates = await task
    assert updates > 20
    assert missing == 0
