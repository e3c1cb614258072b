"""A merge after a whole source is replaced (sql/054): the postings a rebuild gives.

Re-syncing code as a new source deletes one whose postings all sit in blocks (term_dead rows) and writes
another (term_delta rows); one bm25_merge folds both. sql/048 paired every block of a term with every
dead posting of that term before unnesting the block (quadratic in a term's postings: minutes for the
standard library); sql/054 drops a (term, source) whose blocks hold no live posting unread and joins the
other blocks' unnested postings to the dead ones on (term, seq). Its time against size is measured by
bench/bm25_merge_scale.py (the plan that went quadratic depends on the planner's estimates, which a test
corpus small enough to run here does not reliably reproduce).
"""

from __future__ import annotations

import random

import pytest

from services.app import Archivist
from tests.search.test_compact_postings import _merge, _text

#: every live posting, impacts aside (a rebuild computes them from today's average length)
POSTINGS = "SELECT term, chunk_id, source_id, tf, dl FROM chunk_postings"
#: what the chunks hold: the postings must be exactly these
WANTED = (
    "SELECT u.lexeme AS term, c.id AS chunk_id, c.source_id, coalesce(array_length(u.positions, 1), 1) AS tf, "
    "tsvector_length(t.terms) AS dl FROM chunks c, "
    "LATERAL (SELECT archivist_chunk_terms(c.tsv, c.context || ' ' || c.text) AS terms) t, unnest(t.terms) u"
)
#: each (term, source)'s blocks: how many, the postings they hold
SHAPE = "SELECT term, source_id, count(*) AS blocks, sum(n) AS n FROM term_blocks WHERE source_id = $1 GROUP BY 1, 2"
#: blocks out of order or miscounted
BAD_BLOCKS = (
    "SELECT count(*) FROM term_blocks, LATERAL bm25_block_impacts(impacts, impact_max, n) AS i "
    "WHERE n <> cardinality(seqs) OR n <> cardinality(i) OR impact_max <> i[1] OR impact_min <> i[n]"
)


async def _source(app: Archivist, title: str, texts: list[str]) -> str:
    """A source with one document whose chunks are `texts` (inserted in batches, as a sync writes)."""
    source = await app.sources.create(title)
    doc = await app.db.pool.fetchval(
        "INSERT INTO documents (source_id, title, content, content_hash) VALUES ($1, $2, '', '') RETURNING id",
        source.id,
        title,
    )
    for start in range(0, len(texts), 500):
        batch = texts[start : start + 500]
        await app.db.pool.execute(
            "INSERT INTO chunks (document_id, source_id, chunk_index, text, char_start, char_end) "
            "SELECT $1, $2, i, t, 0, length(t) FROM unnest($3::text[], $4::int[]) AS u(t, i)",
            doc,
            source.id,
            batch,
            list(range(start, start + len(batch))),
        )
    return str(source.id)


def _rows(rows: list) -> set[tuple]:
    return {tuple(r) for r in rows}


@pytest.mark.usefixtures("owner")
async def test_a_replaced_source_merges_to_the_postings_of_a_rebuild(app: Archivist) -> None:
    rng = random.Random(54)
    kept = await _source(app, "kept", [_text(rng, i % 2 == 0) for i in range(60)])
    texts = [_text(rng, i % 3 == 0) for i in range(80)]
    old = await _source(app, "old", texts)
    await _merge(app)  # block size 4: every common term spans many blocks
    # the old source goes whole, a new one with the same texts comes, and the kept source changes a little
    # (a partly dead group, new postings landing in existing blocks)
    await app.sources.delete(old)
    new = await _source(app, "new", texts)
    gone = [r["id"] for r in await app.db.pool.fetch("SELECT id FROM chunks WHERE source_id = $1 LIMIT 7", kept)]
    await app.db.pool.execute("DELETE FROM chunks WHERE id = ANY($1::uuid[])", gone)
    await _source(app, "added", [_text(rng, True) for _ in range(5)])
    assert await app.db.pool.fetchval("SELECT count(*) FROM term_dead") > 500
    await _merge(app)
    assert await app.db.pool.fetchval("SELECT count(*) FROM term_dead") == 0
    assert await app.db.pool.fetchval("SELECT count(*) FROM term_delta") == 0
    assert await app.db.pool.fetchval("SELECT count(*) FROM term_blocks WHERE source_id = $1", old) == 0
    assert await app.db.pool.fetchval(BAD_BLOCKS) == 0
    merged, shape = _rows(await app.db.pool.fetch(POSTINGS)), _rows(await app.db.pool.fetch(SHAPE, new))
    assert merged == _rows(await app.db.pool.fetch(WANTED))
    async with app.db.pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT bm25_rebuild(4)")
    assert _rows(await app.db.pool.fetch(POSTINGS)) == merged
    assert _rows(await app.db.pool.fetch(SHAPE, new)) == shape  # the new source cut into blocks as a rebuild cuts
