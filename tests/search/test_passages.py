"""Distinct results: adjacent chunks merged into passages, at most 2 results per document (real PostgreSQL)."""

from __future__ import annotations

from uuid import uuid4

import pytest

from models import SearchHit
from services.app import Archivist
from services.search.passages import cap_per_document, merge_adjacent

CONTENT = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu"


def chunk(doc, index: int, start: int, end: int, score: float, path: list[str] | None = None) -> SearchHit:
    return SearchHit(
        chunk_id=uuid4(),
        document_id=doc,
        document_title="t",
        source_id=doc,
        url=None,
        text=CONTENT[start:end],
        score=score,
        similarity=score,
        match_type="hybrid",
        chunk_index=index,
        char_start=start,
        char_end=end,
        heading_path=path or [],
    )


def test_overlapping_and_adjacent_chunks_become_one_passage() -> None:
    a, b = uuid4(), uuid4()
    hits = [
        chunk(a, 1, 11, 30, 0.9, ["Guide", "Install"]),  # "gamma delta epsilon"
        chunk(b, 0, 0, 10, 0.8),
        chunk(a, 0, 0, 16, 0.7, ["Guide"]),  # overlaps chunk 1 by 5 chars ("gamma")
        chunk(a, 2, 31, 39, 0.6, ["Guide", "Install"]),  # starts after a one-char gap
        chunk(a, 5, 57, 63, 0.5),  # far away: stays separate
    ]
    merged = merge_adjacent(hits)
    assert [h.document_id for h in merged] == [a, b, a]
    passage = merged[0]
    assert passage.text == CONTENT[0:39]
    assert (passage.char_start, passage.char_end) == (0, 39)
    assert (passage.chunk_index, passage.chunk_index_end) == (0, 2)
    assert passage.chunk_ids == [hits[2].chunk_id, hits[0].chunk_id, hits[3].chunk_id]
    assert passage.score == 0.9 and passage.heading_path == ["Guide"]
    assert merged[2].chunk_index_end is None and merged[2].text == CONTENT[57:63]


def test_cap_per_document_fills_up_only_when_documents_run_out() -> None:
    a, b, c = uuid4(), uuid4(), uuid4()
    hits = [chunk(a, i * 3, i * 3, i * 3 + 2, 1 - i / 10) for i in range(4)] + [chunk(b, 0, 0, 2, 0.5)]
    hits.append(chunk(c, 0, 0, 2, 0.4))
    capped = cap_per_document(hits, per_doc=2, k=4)
    assert [h.document_id for h in capped] == [a, a, b, c]
    only_one_doc = cap_per_document(hits[:4], per_doc=2, k=3)
    assert [h.chunk_index for h in only_one_doc] == [0, 3, 6]  # fewer documents than k: a fills the gap
    assert len(cap_per_document(hits, per_doc=2)) == 6  # k=None keeps everything, held-back last-in-rank


@pytest.mark.usefixtures("owner")
async def test_one_long_document_does_not_fill_the_list(app: Archivist) -> None:
    source = await app.sources.create("Distinct passages")
    sections = [
        f"## Mooring step {i}\n\n"
        + " ".join(f"The sailboat mooring line {i} knot {j} is tied to the cleat." for j in range(12))
        for i in range(8)
    ]
    long_doc = await app.documents.create_from_text(source.id, "# Sailboat mooring\n\n" + "\n\n".join(sections))
    others = []
    for topic in ("anchoring a sailboat in a bay", "tying a bowline knot on a boat", "docking lines on a yacht"):
        others.append(await app.documents.create_from_text(source.id, f"Notes on {topic}: keep lines clear."))
    long_id = long_doc.document.id
    assert long_doc.chunks_created >= 6
    content = await app.db.pool.fetchval("SELECT content FROM documents WHERE id = $1", long_id)
    for search_type in ("vector", "hybrid"):
        outcome = await app.search.search("sailboat mooring line knot cleat", source.id, 5, search_type)
        docs = [h.document_id for h in outcome.hits]
        assert docs.count(long_id) == 2, search_type
        assert len(outcome.hits) == 5 and len(set(docs)) == 4
        for hit in outcome.hits:
            if hit.document_id == long_id and hit.chunk_index_end is not None:
                assert hit.text == content[hit.char_start : hit.char_end]  # chunks overlap: exact span
                assert len(hit.chunk_ids) == hit.chunk_index_end - hit.chunk_index + 1
    scoped = await app.sources.create("One document only")
    single = await app.documents.create_from_text(scoped.id, "\n\n".join(sections))
    alone = await app.search.search("sailboat mooring line knot cleat", scoped.id, 3, "hybrid")
    assert {h.document_id for h in alone.hits} == {single.document.id}
    assert len(alone.hits) >= 1
    spans = sorted((h.char_start, h.char_end) for h in alone.hits)
    assert all(prev[1] < nxt[0] for prev, nxt in zip(spans, spans[1:], strict=False))  # distinct, no overlap


def test_only_chunks_ranked_before_the_list_is_full_merge() -> None:
    a, b = uuid4(), uuid4()
    from services.search.passages import distinct_passages

    hits = [chunk(a, 0, 0, 10, 0.9), chunk(b, 0, 0, 5, 0.8), chunk(a, 1, 11, 16, 0.7)]
    assert [h.chunk_index_end for h in distinct_passages(hits, k=2)] == [None, None]  # full before a/1
    bridged = distinct_passages([hits[0], chunk(a, 2, 17, 22, 0.8), hits[2]], k=3)
    assert len(bridged) == 1 and bridged[0].text == CONTENT[0:22]  # a/1 joins a/0 and a/2 into one


def test_passages_stay_within_one_section_and_three_chunks() -> None:
    from services.search.passages import MAX_PASSAGE_CHUNKS, distinct_passages

    a = uuid4()
    text_len = 5
    hits = [  # six consecutive chunks all matching: sections A (0-3) and B (4-5)
        chunk(a, i, i * text_len, i * text_len + text_len - 1, 1.0 - i / 10, ["A"] if i < 4 else ["B"])
        for i in range(6)
    ]
    listed = distinct_passages(hits, k=5)
    assert all(len(p.chunk_ids or [p.chunk_id]) <= MAX_PASSAGE_CHUNKS for p in listed)
    assert [(p.chunk_index, p.chunk_index_end, p.heading_path) for p in listed] == [(0, 2, ["A"]), (4, 5, ["B"])]
