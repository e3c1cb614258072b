"""A profile's source order reorders only near-ties (services/search: by_source_order)."""

from __future__ import annotations

import random
import uuid

from models import SearchHit
from services.search import SOURCE_ORDER_BOOST, by_source_order

SOURCES = [uuid.uuid4() for _ in range(4)]


def hit(score: float, source: uuid.UUID, n: int) -> SearchHit:
    return SearchHit(
        chunk_id=uuid.uuid4(), document_id=uuid.uuid4(), document_title=f"d{n}", source_id=source, url=None,
        text=f"t{n}", score=score, similarity=score, match_type="hybrid", chunk_index=0, char_start=0, char_end=2,
    )  # fmt: skip


def test_exact_ties_follow_the_source_order() -> None:
    hits = [hit(0.5, SOURCES[3], 0), hit(0.5, SOURCES[1], 1), hit(0.5, SOURCES[0], 2), hit(0.5, SOURCES[2], 3)]
    assert [h.source_id for h in by_source_order(hits, SOURCES)] == SOURCES


def test_only_near_ties_move() -> None:
    rng = random.Random(21)
    for _ in range(500):
        hits = sorted((hit(round(rng.random(), 3), rng.choice(SOURCES), n) for n in range(30)), key=lambda h: -h.score)
        ordered = by_source_order(hits, SOURCES)
        assert sorted(ordered, key=id) == sorted(hits, key=id)  # the same hits
        position = {h.chunk_id: i for i, h in enumerate(ordered)}
        for i, earlier in enumerate(hits):
            for later in hits[i + 1 :]:
                if earlier.score - later.score > SOURCE_ORDER_BOOST + 1e-9:
                    assert position[earlier.chunk_id] < position[later.chunk_id]  # far apart: never swapped
                if position[later.chunk_id] < position[earlier.chunk_id]:  # swapped: a near-tie, for the order
                    assert earlier.score - later.score <= SOURCE_ORDER_BOOST + 1e-9
                    assert SOURCES.index(later.source_id) < SOURCES.index(earlier.source_id)


def test_no_order_or_one_source_changes_nothing() -> None:
    hits = [hit(0.5, SOURCES[1], 0), hit(0.5, SOURCES[0], 1)]
    assert by_source_order(hits, []) == hits and by_source_order(hits, SOURCES[:1]) == hits
    outside = [hit(0.5, uuid.uuid4(), 0), hit(0.5, SOURCES[0], 1)]
    assert by_source_order(outside, SOURCES)[0].source_id == SOURCES[0]  # unknown sources rank last
