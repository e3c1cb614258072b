"""Impact-ordered BM25 postings (sql/012): kept by the triggers, rebuilt in bulk, and the keyword leg
that reads only the best postings per term agrees with exhaustive BM25 (real PostgreSQL)."""

from __future__ import annotations

import math

import pytest

from services.app import Archivist
from services.search import bm25_index
from services.search.base import SearchRequest
from services.search.bm25 import bm25_term, idf, query_terms
from services.search.hybrid import HybridSearch
from tests.search.test_bm25 import _python_bm25 as python_bm25_order

# Chunks with different mixes of "ferment" and "sourdough", of different lengths, so that both
# terms' impact orders differ from insertion order and from each other.
TEXTS = [
    "Sourdough starter: ferment flour and water; a sourdough loaf needs a lively sourdough culture.",
    "Ferment vegetables in brine. Ferment cabbage for kimchi; ferment cucumbers for pickles. Ferment.",
    "Bread notes: sourdough.",
    "A long essay on grain, mills, ovens, crust, crumb, hydration, salt, time and patience, and once "
    "the dough is allowed to ferment slowly overnight the flavour deepens.",
    "Sourdough and ferment: to ferment sourdough dough, keep it cool.",
    "Yeast breads rise fast; sourdough breads ferment slowly.",
    "Kombucha: ferment sweet tea with a culture.",
    "Tomatoes need sun.",
]
QUERY = "ferment sourdough"


async def _corpus(app: Archivist, name: str, texts: list[str] = TEXTS):
    source = await app.sources.create(name)
    for i, text in enumerate(texts):
        await app.documents.create_from_text(source.id, text, title=f"{name} {i}", url=f"{name}:{i}")
    return source


async def _vector(app: Archivist, text: str):
    from services.embeddings import embed_query_async

    return await embed_query_async(app.search.embedder, text)


async def _keyword_ranking(app: Archivist, source_id, query: str = QUERY, **overrides) -> list[tuple]:
    """(chunk id, keyword rank) of the keyword leg, keyword-only fusion, in rank order."""
    update = {"hybrid_vector_weight": 0.0, "keyword_max_term_frequency": 1.0, **overrides}
    hybrid = HybridSearch(app.db, app.settings.model_copy(update=update))
    rows = await hybrid.fused_rows(SearchRequest(query, await _vector(app, query), 20, source_id and [source_id]), 20)
    keyword = sorted((r for r in rows if r["krank"] is not None), key=lambda r: r["krank"])
    return [(r["chunk_id"], r["krank"]) for r in keyword]


async def _python_bm25(app: Archivist, source_id, query: str = QUERY) -> list:
    """Chunk ids of `source_id` in exact BM25 order (every df counted), computed here from chunks.tsv."""
    terms = await query_terms(app.db, query, 1.0)
    return await python_bm25_order(app, source_id, dict(zip(terms.terms, terms.idfs, strict=True)), terms.avgdl)


@pytest.mark.usefixtures("owner")
async def test_impact_leg_equals_exhaustive_bm25_when_it_reads_every_posting(app: Archivist) -> None:
    source = await _corpus(app, "impacts-equal")
    expected = await _python_bm25(app, source.id)
    assert len(expected) == 7  # every chunk with either term, and none without
    exhaustive = await _keyword_ranking(app, source.id, bm25_postings_per_term=0)
    impact = await _keyword_ranking(app, source.id, bm25_postings_per_term=1000)
    assert [cid for cid, _ in exhaustive] == expected
    assert impact == exhaustive


@pytest.mark.usefixtures("owner")
async def test_impact_leg_reading_few_postings_still_ranks_the_best_first(app: Archivist) -> None:
    source = await _corpus(app, "impacts-few")
    expected = await _python_bm25(app, source.id)
    # two postings per term: the candidates are the union of each term's two best chunks
    few = await _keyword_ranking(app, source.id, bm25_postings_per_term=2, bm25_candidates=1, hybrid_candidates=4)
    assert 2 <= len(few) <= 4
    ranked = [cid for cid, _ in few]
    assert ranked[0] == expected[0]
    # the candidates are scored exactly: their order is their exact BM25 order
    assert ranked == [cid for cid in expected if cid in set(ranked)]


@pytest.mark.usefixtures("owner")
async def test_new_chunks_get_impacts_and_are_found(app: Archivist) -> None:
    source = await _corpus(app, "impacts-incremental")
    avgdl = await app.db.pool.fetchval("SELECT bm25_avgdl()")
    doc = await app.documents.create_from_text(
        source.id, "Sourdough sourdough sourdough: ferment, ferment.", title="new", url="impacts-incremental:new"
    )
    rows = await app.db.pool.fetch(
        "SELECT t.tf, t.dl, t.impact FROM chunk_postings t JOIN chunks c ON c.id = t.chunk_id WHERE c.document_id = $1",
        doc.document.id,
    )
    assert rows and all(r["impact"] is not None for r in rows)
    after = await app.db.pool.fetchval("SELECT bm25_avgdl()")
    for r in rows:  # written with the totals that include the new chunk
        assert math.isclose(r["impact"], bm25_term(r["tf"], r["dl"], after, 1.0, 1.2, 0.75), rel_tol=1e-5)
    assert after != avgdl
    top = await _keyword_ranking(app, source.id, bm25_postings_per_term=2)
    new_chunk = await app.db.pool.fetchval("SELECT id FROM chunks WHERE document_id = $1", doc.document.id)
    assert top[0][0] == new_chunk == (await _python_bm25(app, source.id))[0]


@pytest.mark.usefixtures("owner")
async def test_source_filter_reads_that_source_s_postings(app: Archivist) -> None:
    strong = await _corpus(app, "impacts-other", [TEXTS[0], TEXTS[1], TEXTS[4]] * 3)
    weak = await _corpus(app, "impacts-mine", [TEXTS[2], TEXTS[6]])
    ranking = await _keyword_ranking(app, weak.id, bm25_postings_per_term=1)
    assert len(ranking) == 2  # each term's best posting *in this source*, not the other's
    mine = {r["id"] for r in await app.db.pool.fetch("SELECT id FROM chunks WHERE source_id = $1", weak.id)}
    assert {cid for cid, _ in ranking} == mine
    assert strong.id != weak.id


@pytest.mark.usefixtures("owner")
async def test_bulk_rebuild_reproduces_the_trigger_maintained_postings(app: Archivist) -> None:
    await _corpus(app, "impacts-rebuild")
    columns = "term, chunk_id, source_id, tf, dl"
    before = set(await app.db.pool.fetch(f"SELECT {columns} FROM chunk_postings"))
    totals = await app.db.pool.fetchrow("SELECT sum(chunks) AS n, sum(length) AS len FROM bm25_totals")
    async with app.db.pool.acquire() as conn:
        await bm25_index.set_triggers(conn, False)
        await conn.execute(
            "UPDATE chunks SET text = text || ' unindexed' WHERE id = (SELECT id FROM chunks ORDER BY id LIMIT 1)"
        )
        assert set(await conn.fetch(f"SELECT {columns} FROM chunk_postings")) == before  # triggers off
        await conn.execute(
            "UPDATE chunks SET text = left(text, -10) WHERE id = (SELECT id FROM chunks ORDER BY id LIMIT 1)"
        )
        timings = await bm25_index.rebuild(conn)
        await bm25_index.set_triggers(conn, True)
    assert set(timings) >= {"postings_seconds", "vacuum_seconds"}
    assert set(await app.db.pool.fetch(f"SELECT {columns} FROM chunk_postings")) == before
    assert tuple(await app.db.pool.fetchrow("SELECT sum(chunks), sum(length) FROM bm25_totals")) == tuple(totals)
    avgdl = float(totals["len"]) / float(totals["n"])
    for r in await app.db.pool.fetch("SELECT tf, dl, impact FROM chunk_postings"):
        assert math.isclose(r["impact"], bm25_term(r["tf"], r["dl"], avgdl, 1.0, 1.2, 0.75), rel_tol=1e-5)
    indexes = {
        r["indexname"]
        for r in await app.db.pool.fetch("SELECT indexname FROM pg_indexes WHERE tablename = 'term_blocks'")
    }
    assert indexes == {"term_blocks_term_idx"}
    # triggers are back: a new document is indexed
    source = await app.sources.create("impacts-after-rebuild")
    await app.documents.create_from_text(source.id, "Rye sourdough.", title="rye", url="after:rye")
    assert await app.db.pool.fetchval("SELECT count(*) FROM chunk_postings WHERE source_id = $1", source.id) > 0


@pytest.mark.usefixtures("owner")
async def test_statistics_estimate_df_of_common_terms_and_rank_as_exact_counts(app: Archivist) -> None:
    # every chunk has "glaze" and "kiln" (distinct lengths: no ties), a few "kimchi"
    texts = [f"Pottery note: glaze the kiln {'shelf ' * i}" for i in range(30)]
    texts += ["A kimchi jar beside the kiln.", "Kimchi in a clay crock."]
    source = await _corpus(app, "impacts-estimates", texts)
    await app.db.pool.execute("ANALYZE chunks")
    hybrid = HybridSearch(app.db, app.settings.model_copy(update={"keyword_statistics_min_chunks": 0}))
    hybrid.term_stats._loaded_at = float("-inf")  # re-read the statistics ANALYZE just wrote
    estimates = await hybrid.term_stats.frequencies()
    chunks = await app.db.pool.fetchval("SELECT sum(chunks) FROM bm25_totals")
    for term in ("kiln", "glaze"):
        true_df = await app.db.pool.fetchval("SELECT count(*) FROM chunk_postings WHERE term = $1", term)
        assert term in estimates and abs(estimates[term] * float(chunks) - true_df) <= max(2, 0.1 * true_df)
    query = "kiln glaze kimchi"
    exact = await query_terms(app.db, query, 1.0)
    estimated = await query_terms(app.db, query, 1.0, estimates)
    assert estimated.terms == exact.terms
    for got, want in zip(estimated.idfs, exact.idfs, strict=True):
        assert abs(got - want) <= 0.05 * want + 1e-3
    # the service's keyword leg (df from the statistics) ranks as exact BM25 with counted df
    ranking = await _keyword_ranking(app, source.id, query)
    assert [cid for cid, _ in ranking] == (await _python_bm25(app, source.id, query))[:20]
    # an estimated term is never counted: a (wrong) estimate decides, for pruning and for idf
    wrong = {**estimates, "kimchi": 0.99}
    assert (await query_terms(app.db, query, 0.98, wrong)).terms == ["glaze", "kiln"]
    both = await query_terms(app.db, "kiln kimchi", 0.5, {"kimchi": 0.99, "kiln": 0.99})
    assert both.terms == ["kiln", "kimchi"]  # equal estimates: by name
    assert both.idfs[0] == both.idfs[1] == idf(float(chunks), round(0.99 * float(chunks)))
