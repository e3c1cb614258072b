"""The postings rebuilt by several connections (sql/052, bm25_index.rebuild_parallel) equal the serial rebuild's.

Each connection numbers the chunks of its range of pages, then writes the blocks of its part of the
terms; a part dropped or written twice, a chunk numbered differently, or a block cut differently
changes the chunk_seqs rows or the multiset of block rows compared here. Blocks of 4 postings make
most terms span several blocks.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from services.app import Archivist
from services.search import bm25_index

BLOCK = 4
WORDS = "alpha beta gamma delta kiln glaze sourdough ferment tensor gradient socket thread".split()
NAMES = ["mock.patch.object", "dirs_exist_ok", "tokio::spawn"]
BLOCKS = "SELECT b.term, b::text AS block FROM term_blocks b"  # every column as text (reals round-trip)
SEQS = "SELECT s::text FROM chunk_seqs s"


async def _corpus(app: Archivist) -> None:
    rng = random.Random(52)
    for s in range(2):
        source = await app.sources.create(f"parallel rebuild {s}")
        for i in range(30):
            words = rng.choices(WORDS, [1.0 / (k + 1) for k in range(len(WORDS))], k=rng.randint(3, 30))
            words += rng.choices(NAMES, k=rng.randint(0, 2))
            await app.documents.ingest(source.id, f"p{s}-{i}", " ".join(words), "markdown", f"p{s}:{i}", embed=False)


async def _postings(app: Archivist) -> tuple[Counter, list, tuple]:
    blocks = Counter(tuple(r) for r in await app.db.pool.fetch(BLOCKS))
    seqs = sorted(r[0] for r in await app.db.pool.fetch(SEQS))
    totals = tuple(await app.db.pool.fetchrow("SELECT sum(chunks), sum(length) FROM bm25_totals"))
    return blocks, seqs, totals


@pytest.mark.usefixtures("owner")
async def test_parallel_rebuild_writes_the_serial_rebuild_s_blocks(app: Archivist) -> None:
    await _corpus(app)
    async with app.db.pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT bm25_rebuild($1)", BLOCK)
    serial = await _postings(app)
    blocks = serial[0]
    pages = await app.db.pool.fetchval("SELECT count(DISTINCT (ctid::text::point)[0]) FROM chunks")
    assert pages >= 3  # every part numbers chunks of its own pages
    terms = sorted({term for term, _ in blocks})
    assert sum(blocks.values()) > 2 * len(terms)  # terms span blocks
    for parts in (2, 3):
        in_part = await app.db.pool.fetchval(
            "SELECT array_agg(DISTINCT bm25_term_part(t, $2)) FROM unnest($1::text[]) t", terms, parts
        )
        assert sorted(in_part) == list(range(parts))  # every connection has terms to write
        timings = await bm25_index.rebuild_parallel(app.db.pool, parts, block_size=BLOCK)
        assert set(timings) == {"seqs_seconds", "postings_seconds", "vacuum_seconds"}
        assert await _postings(app) == serial, parts
    indexes = {r["indexname"] for r in await app.db.pool.fetch("SELECT indexname FROM pg_indexes")}
    assert "term_blocks_term_idx" in indexes
    with pytest.raises(ValueError):
        await bm25_index.rebuild_parallel(app.db.pool, 0)


#: Postings whose stored impact is not bm25_impact of their own tf and chunk length (sql/053 looks the
#: impacts of tf up to 64 up per distinct length instead of computing each one).
WRONG_IMPACTS = """
SELECT count(*) FILTER (WHERE p.impact IS DISTINCT FROM bm25_impact(p.tf, p.dl, bm25_avgdl())) AS wrong,
       count(*) AS postings, max(p.tf) AS max_tf, count(DISTINCT p.tf) AS tfs
FROM chunk_postings p
"""


@pytest.mark.usefixtures("owner")
async def test_rebuilt_impacts_are_bm25_impact_of_each_posting(app: Archivist) -> None:
    rng = random.Random(53)
    source = await app.sources.create("repeated words")
    for i in range(30):
        words = rng.choices(WORDS, [1.0 / (k + 1) for k in range(len(WORDS))], k=rng.randint(3, 60))
        words += ["kiln"] * (63, 64, 65, 90, 1)[i % 5]  # tfs around the lookup's last (64), and past it
        await app.documents.ingest(source.id, f"r{i}", " ".join(words), "markdown", f"r:{i}", embed=False)
    for parts in (1, 2):
        await bm25_index.rebuild_parallel(app.db.pool, parts, block_size=BLOCK)
        row = await app.db.pool.fetchrow(WRONG_IMPACTS)
        assert row["wrong"] == 0, parts
        assert row["max_tf"] >= 90 and row["tfs"] >= 8  # tfs in and past the lookup
    async with app.db.pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT bm25_rebuild($1)", BLOCK)
    assert (await app.db.pool.fetchrow(WRONG_IMPACTS))["wrong"] == 0
