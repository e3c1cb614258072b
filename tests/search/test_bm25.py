"""BM25 inside PostgreSQL: term statistics kept by triggers, scores as the formula says (real PostgreSQL)."""

from __future__ import annotations

import math

import pytest

from services.app import Archivist
from services.search.base import SearchRequest
from services.search.bm25 import bm25_term, idf, query_terms
from services.search.hybrid import HybridSearch

DOCS = {
    "kiln": "Firing a pottery kiln: the kiln reaches cone six. Glaze the pottery before the second kiln firing.",
    "wheel": "Throwing pottery on a wheel: center the clay, open it, pull the walls up.",
    "glaze": "Glaze recipes: a celadon glaze needs iron oxide; test every glaze on a tile.",
    "garden": "Tomato plants need sun, water and staking; pinch the suckers weekly.",
}

#: Each chunk with the terms its postings hold (sql/030_identifier_terms.sql).
CHUNKS = "(SELECT id, source_id, archivist_chunk_terms(c.tsv, c.context || ' ' || c.text) AS terms FROM chunks c)"


async def index_state(app: Archivist, source_id) -> tuple[dict, tuple[int, int]]:
    """(term, chunk) -> (tf, dl) as stored, and the stored totals, next to what each chunk's terms say
    (its tsv and the names in its text, sql/030)."""
    stored = {
        (r["term"], r["chunk_id"]): (r["tf"], r["dl"])
        for r in await app.db.pool.fetch(
            "SELECT term, chunk_id, tf, dl FROM chunk_postings WHERE source_id = $1", source_id
        )
    }
    expected = {
        (r["lexeme"], r["id"]): (r["tf"], r["dl"])
        for r in await app.db.pool.fetch(
            "SELECT u.lexeme, c.id, coalesce(array_length(u.positions, 1), 1) AS tf, tsvector_length(c.terms) AS dl "
            f"FROM {CHUNKS} c, unnest(c.terms) u WHERE c.source_id = $1",
            source_id,
        )
    }
    assert stored == expected
    # every stored posting is live (a dead one left in a block and not listed dead would show here)
    raw = (
        "SELECT (SELECT coalesce(sum(n), 0) FROM term_blocks) + (SELECT count(*) FROM term_delta)"
        " - (SELECT count(*) FROM term_dead)"
    )
    assert await app.db.pool.fetchval(raw) == await app.db.pool.fetchval("SELECT count(*) FROM chunk_postings")
    totals = await app.db.pool.fetchrow("SELECT sum(chunks) AS n, sum(length) AS len FROM bm25_totals")
    real = await app.db.pool.fetchrow(
        f"SELECT count(*) AS n, coalesce(sum(tsvector_length(c.terms)), 0) AS len FROM {CHUNKS} c"
    )
    assert (totals["n"], totals["len"]) == (real["n"], real["len"])
    return stored, (real["n"], real["len"])


@pytest.mark.usefixtures("owner")
async def test_term_statistics_follow_insert_update_and_delete(app: Archivist) -> None:
    source = await app.sources.create("BM25 statistics")
    ids = {}
    for key, text in DOCS.items():
        ids[key] = (await app.documents.create_from_text(source.id, text, title=key, url=f"mem:{key}")).document.id
    stored, (chunks, _) = await index_state(app, source.id)
    assert chunks >= 4 and any(term == "kiln" and tf == 4 for (term, _), (tf, _) in stored.items())  # title + 3
    # re-ingest the same URL with new text: old terms go, new ones come
    await app.documents.create_from_text(source.id, "Raku firing in a gas kiln.", title="kiln", url="mem:kiln")
    stored, _ = await index_state(app, source.id)
    assert not any(term == "cone" for term, _ in stored)
    # an update of the text (and one of the embedding only, which must not re-index)
    await app.db.pool.execute(
        "UPDATE chunks SET text = 'Wheel throwing: trimming the foot ring.' WHERE document_id = $1", ids["wheel"]
    )
    await app.db.pool.execute("UPDATE chunks SET embedding = embedding WHERE document_id = $1", ids["glaze"])
    stored, _ = await index_state(app, source.id)
    assert any(term == "trim" for term, _ in stored) and not any(term == "clay" for term, _ in stored)
    # names (sql/030): an update that changes a name but not the tsv re-indexes it too
    await app.db.pool.execute("UPDATE chunks SET text = 'dirs exist ok' WHERE document_id = $1", ids["wheel"])
    await app.db.pool.execute("UPDATE chunks SET text = 'dirs_exist_ok' WHERE document_id = $1", ids["wheel"])
    stored, _ = await index_state(app, source.id)
    assert any(term == "dirs_exist_ok" for term, _ in stored)
    await app.documents.delete(ids["garden"])
    stored, _ = await index_state(app, source.id)
    assert not any(term == "tomato" for term, _ in stored)
    await app.db.pool.execute("DELETE FROM sources WHERE id = $1", source.id)
    assert await app.db.pool.fetchval("SELECT count(*) FROM chunk_postings WHERE source_id = $1", source.id) == 0
    await index_state(app, source.id)


@pytest.mark.usefixtures("owner")
async def test_keyword_leg_ranks_by_bm25(app: Archivist) -> None:
    source = await app.sources.create("BM25 ranking")
    for key, text in DOCS.items():
        await app.documents.create_from_text(source.id, text, title=key, url=f"rank:{key}")
    settings = app.settings.model_copy(update={"hybrid_vector_weight": 0.0, "keyword_max_term_frequency": 1.0})
    hybrid = HybridSearch(app.db, settings)
    query = "pottery glaze kiln"
    terms = await query_terms(app.db, query, 1.0)
    assert sorted(terms.terms) == ["glaze", "kiln", "potteri"]
    # the statistics the query used are the corpus' own
    n = await app.db.pool.fetchval("SELECT count(*) FROM chunks")
    for term, value in zip(terms.terms, terms.idfs, strict=True):
        df = await app.db.pool.fetchval("SELECT count(*) FROM chunks WHERE tsv @@ $1::text::tsquery", term)
        assert math.isclose(value, idf(n, df))
    rows = await hybrid.fused_rows(SearchRequest(query, await _vector(app, query), 10, [source.id]), 10)
    keyword_rows = [r for r in rows if r["krank"] is not None]
    expected = await _python_bm25(app, source.id, dict(zip(terms.terms, terms.idfs, strict=True)), terms.avgdl)
    assert [r["chunk_id"] for r in sorted(keyword_rows, key=lambda r: r["krank"])] == expected
    assert [r["document_title"] for r in sorted(keyword_rows, key=lambda r: r["krank"])][0] == "kiln"


async def _vector(app: Archivist, text: str):
    from services.embeddings import embed_query_async

    return await embed_query_async(app.search.embedder, text)


async def _python_bm25(app: Archivist, source_id, idfs: dict[str, float], avgdl: float) -> list:
    """Chunk ids in BM25 order, computed here from each chunk's tsvector."""
    scores: dict = {}
    rows = await app.db.pool.fetch(
        "SELECT c.id, u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf, tsvector_length(c.terms) AS dl "
        f"FROM {CHUNKS} c, unnest(c.terms) u WHERE c.source_id = $1",
        source_id,
    )
    for r in rows:
        if r["lexeme"] in idfs:
            scores[r["id"]] = scores.get(r["id"], 0.0) + bm25_term(
                r["tf"], r["dl"], avgdl, idfs[r["lexeme"]], 1.2, 0.75
            )
    return sorted(scores, key=lambda cid: (-scores[cid], str(cid)))


@pytest.mark.parametrize("ranking", ["bm25", "ts_rank"])
@pytest.mark.parametrize("fusion", ["rrf", "convex"])
@pytest.mark.usefixtures("owner")
async def test_every_keyword_ranking_and_fusion_finds_the_page(app: Archivist, ranking: str, fusion: str) -> None:
    source = await app.sources.create(f"Modes {ranking} {fusion}")
    for key, text in DOCS.items():
        await app.documents.create_from_text(source.id, text, title=key, url=f"modes:{key}")
    settings = app.settings.model_copy(update={"keyword_ranking": ranking, "hybrid_fusion": fusion})
    query = "celadon iron oxide"
    hits = await HybridSearch(app.db, settings).search(SearchRequest(query, await _vector(app, query), 4, [source.id]))
    assert hits[0].document_title == "glaze" and hits[0].match_type == "hybrid"
    assert all(0.0 <= h.score <= 1.0 for h in hits) and hits == sorted(hits, key=lambda h: -h.score)
