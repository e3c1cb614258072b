"""Slim blocks (sql/048): a block's tfs stop at its last tf above 1, and the blocks are written with one sort.

Rankings must not move: the keyword leg (pruned and exhaustive, `all` mode) equals BM25 computed from the
chunks (tests/search/test_compact_postings.py's oracle) on blocks in the short form, after writes and a
merge, and on a knowledge base whose blocks were written before sql/048 (every tf stored) and then
upgraded, with a merge rewriting some of its blocks in the short form.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from services.app import Archivist
from services.core.database import SQL_DIR
from tests.conftest import fresh_database, make_settings
from tests.search.test_compact_postings import (
    FULL,
    QUERIES,
    _assert_rankings,
    _assert_same,
    _corpus,
    _exhaustive,
    _holders,
    _leg,
    _merge,
    _oracle,
    _query_lexemes,
    _rebuild,
    _text,
)

#: Every stored posting's tf, read back through the view, against its chunk's own count.
TF_MISMATCHES = """
SELECT count(*) FROM chunk_postings p JOIN chunks c ON c.id = p.chunk_id
JOIN LATERAL unnest(archivist_chunk_terms(c.tsv, c.context || ' ' || c.text)) u ON u.lexeme = p.term
WHERE p.tf <> coalesce(array_length(u.positions, 1), 1)
"""
#: Blocks with a trailing tf of 1 (the long form), and blocks whose tfs are all 1 yet stored.
LONG_BLOCKS = "SELECT count(*) FROM term_blocks WHERE tfs[cardinality(tfs)] = 1"
STORED_ONES = "SELECT count(*) FROM term_blocks WHERE tfs IS NOT NULL AND 1 = ALL(tfs)"


async def _assert_all_mode(app: Archivist) -> None:
    oracle = await _oracle(app, stored_impacts=True)
    for query in QUERIES:
        terms = await _query_lexemes(app, query)
        held = _holders(oracle, terms)
        scores = {c: s for c, s in _exhaustive(oracle, terms).items() if len(held[c]) == len(terms)}
        want = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
        _assert_same(await _leg(app, query, None, mode="all", **FULL), want, query)


async def _write(app: Archivist, sources: list, seed: int) -> None:
    """New chunks, text updates and deletes."""
    rng = random.Random(seed)
    for i in range(9):
        await app.documents.ingest(
            sources[i % 3].id, f"w{seed}-{i}", _text(rng, i % 3 == 2), "markdown", f"w{seed}:{i}", embed=False
        )
    ids = [r["id"] for r in await app.db.pool.fetch("SELECT id FROM chunks ORDER BY id LIMIT 20")]
    for cid in ids[:5]:
        await app.db.pool.execute(
            "UPDATE chunks SET text = $2 WHERE id = $1", cid, "alpha alpha beta " + _text(rng, False)
        )
    await app.db.pool.execute("DELETE FROM chunks WHERE id = ANY($1::uuid[])", ids[5:10])


@pytest.mark.usefixtures("owner")
async def test_short_tfs_rank_exactly_through_writes_and_merges(app: Archivist) -> None:
    sources = await _corpus(app)
    await _rebuild(app)
    pool = app.db.pool
    assert await pool.fetchval("SELECT count(*) FROM term_blocks WHERE tfs IS NULL") > 0
    assert await pool.fetchval("SELECT count(*) FROM term_blocks WHERE tfs IS NOT NULL") > 0
    assert await pool.fetchval("SELECT count(*) FROM term_blocks WHERE cardinality(tfs) < n") > 0
    assert await pool.fetchval(LONG_BLOCKS) == 0
    assert await pool.fetchval(STORED_ONES) == 0
    assert await pool.fetchval(TF_MISMATCHES) == 0
    await _assert_rankings(app, await _oracle(app))
    await _assert_all_mode(app)
    await _write(app, sources, 1)
    await _merge(app)
    assert await pool.fetchval(LONG_BLOCKS) == 0
    assert await pool.fetchval(TF_MISMATCHES) == 0
    await _assert_rankings(app, await _oracle(app, stored_impacts=True))
    await _assert_rankings(app, await _oracle(app, stored_impacts=True), [sources[0].id])
    await _assert_all_mode(app)


@pytest.fixture
async def own_database(pg_server: Any) -> AsyncIterator[str]:
    """A database of its own (the test rewinds a migration)."""
    async with fresh_database(pg_server) as url:
        yield url


async def _rewind(app: Archivist) -> None:
    """The layout before sql/048: sql/042 and sql/044 applied again (every tf stored, NOT NULL)."""
    assert app.db.config is not None
    fmt = {"embedding_dim": app.db.config.embedding_dim, "fts_config": app.db.fts_config}
    async with app.db.pool.acquire() as conn, conn.transaction():
        await conn.execute("DELETE FROM schema_migrations WHERE version = '048_slim_blocks'")
        for name in ("042_compact_postings.sql", "044_faster_postings_build.sql"):
            await conn.execute((SQL_DIR / name).read_text().format(**fmt))
        await conn.execute("SELECT bm25_rebuild(4)")
        await conn.execute("ALTER TABLE term_blocks ALTER COLUMN tfs SET NOT NULL")


@pytest.mark.usefixtures("owner")
async def test_blocks_written_before_the_upgrade_rank_the_same(
    own_database: str, tmp_path: Path, embedder: Any
) -> None:
    settings = make_settings(own_database, tmp_path)
    app = await Archivist.open(settings, embedder)
    try:
        sources = await _corpus(app)
        await _rewind(app)
        assert await app.db.pool.fetchval(LONG_BLOCKS) > 0  # every tf stored
        before = sorted(await app.db.pool.fetch("SELECT * FROM chunk_postings"))
    finally:
        await app.close()
    app = await Archivist.open(settings, embedder)  # sql/048 runs again
    try:
        pool = app.db.pool
        assert await pool.fetchval("SELECT 1 FROM schema_migrations WHERE version = '048_slim_blocks'") == 1
        long_blocks = await pool.fetchval(LONG_BLOCKS)
        assert long_blocks > 0  # nothing rewritten: the old blocks read as they are
        assert sorted(await pool.fetch("SELECT * FROM chunk_postings")) == before
        await _assert_rankings(app, await _oracle(app))
        await _assert_all_mode(app)
        await _write(app, sources, 2)  # a merge rewrites the blocks it touches in the short form
        await _merge(app)
        assert 0 < await pool.fetchval(LONG_BLOCKS) < long_blocks
        assert await pool.fetchval(TF_MISMATCHES) == 0
        await _assert_rankings(app, await _oracle(app, stored_impacts=True))
        await _assert_all_mode(app)
        await _rebuild(app)
        assert await pool.fetchval(LONG_BLOCKS) == 0
        await _assert_rankings(app, await _oracle(app))
    finally:
        await app.close()
