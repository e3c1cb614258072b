"""Slimmer postings (sql/058): a block whose postings share one impact stores none, and a rebuild builds
chunk_seqs' keys after its rows.

Rankings must not move: the keyword leg (pruned, exhaustive and `all` mode) equals BM25 from the chunks
(tests/search/test_compact_postings.py's oracle, which replays the leg with each posting's impact) on
blocks in the short form, after writes and a merge (which unpacks blocks without impacts), and on blocks
written before sql/058 (every impact stored). Each posting's impact, read back through the view, is the
one its block was written with.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from services.app import Archivist
from services.core.database import SQL_DIR
from services.search import bm25_index
from tests.conftest import fresh_database, make_settings
from tests.search.test_compact_postings import _assert_rankings, _corpus, _merge, _oracle, _rebuild
from tests.search.test_slim_blocks import _assert_all_mode, _write

#: Blocks in the short form (impacts NULL), and blocks breaking it: one impact yet stored, or no
#: impacts though they differ.
SHORT = "SELECT count(*) FROM term_blocks WHERE impacts IS NULL"
BROKEN = (
    "SELECT count(*) FROM term_blocks WHERE (impacts IS NOT NULL AND impact_max = impact_min) "
    "OR (impacts IS NULL AND impact_max <> impact_min)"
)
#: Every posting's impact against bm25_impact(tf, dl) at the rebuild's average length (the impacts of a
#: rebuild), read through the view.
IMPACT_MISMATCHES = """
SELECT count(*) FROM chunk_postings p
WHERE p.impact IS DISTINCT FROM bm25_impact(p.tf, p.dl, bm25_avgdl())
"""
#: Every live posting with its chunk's seq (a chunk whose text changes gets a new seq, and new impacts).
POSTINGS = "SELECT p.term, s.seq, p.impact FROM chunk_postings p JOIN chunk_seqs s ON s.chunk_id = p.chunk_id"
KEYS = (
    "SELECT array_agg(conname::text ORDER BY conname) FROM pg_constraint "
    "WHERE conrelid = 'chunk_seqs'::regclass AND contype IN ('p', 'u')"
)


@pytest.mark.usefixtures("owner")
async def test_blocks_of_one_impact_store_none_and_rank_exactly(app: Archivist) -> None:
    sources = await _corpus(app)
    await _rebuild(app)
    pool = app.db.pool
    assert await pool.fetchval(KEYS) == ["chunk_seqs_chunk_id_key", "chunk_seqs_pkey"]
    assert await pool.fetchval(SHORT) > 0
    assert await pool.fetchval("SELECT count(*) FROM term_blocks WHERE impacts IS NOT NULL") > 0
    assert await pool.fetchval(BROKEN) == 0
    assert await pool.fetchval(IMPACT_MISMATCHES) == 0
    await _assert_rankings(app, await _oracle(app))
    await _assert_all_mode(app)
    before = await pool.fetch(POSTINGS)
    await _write(app, sources, 3)
    await _merge(app)  # unpacks short blocks among others
    assert await pool.fetchval(BROKEN) == 0
    after = {(r["term"], r["seq"]): r["impact"] for r in await pool.fetch(POSTINGS)}
    kept = [(r["term"], r["seq"], r["impact"]) for r in before if (r["term"], r["seq"]) in after]
    assert len(kept) > len(before) // 2
    assert all(after[(term, seq)] == impact for term, seq, impact in kept)  # merged, not changed
    await _assert_rankings(app, await _oracle(app, stored_impacts=True))
    await _assert_rankings(app, await _oracle(app, stored_impacts=True), [sources[1].id])
    await _assert_all_mode(app)
    for parts in (1, 2):  # the rebuilds drop chunk_seqs' keys and add them back
        if parts == 1:
            await _rebuild(app)
        else:
            await bm25_index.rebuild_parallel(pool, parts, block_size=4)
        assert await pool.fetchval(KEYS) == ["chunk_seqs_chunk_id_key", "chunk_seqs_pkey"]
        assert await pool.fetchval(BROKEN) == 0
        await _assert_rankings(app, await _oracle(app))


@pytest.fixture
async def own_database(pg_server: Any) -> AsyncIterator[str]:
    """A database of its own (the test rewinds a migration)."""
    async with fresh_database(pg_server) as url:
        yield url


async def _rewind(app: Archivist) -> None:
    """The layout before sql/058: sql/054's merge back, every block with its impacts, NOT NULL."""
    assert app.db.config is not None
    fmt = {"embedding_dim": app.db.config.embedding_dim, "fts_config": app.db.fts_config}
    async with app.db.pool.acquire() as conn, conn.transaction():
        await conn.execute("DELETE FROM schema_migrations WHERE version = '058_slimmer_postings'")
        await conn.execute("SELECT bm25_rebuild(4)")
        await conn.execute("UPDATE term_blocks SET impacts = array_fill(impact_max, ARRAY[n]) WHERE impacts IS NULL")
        await conn.execute("ALTER TABLE term_blocks ALTER COLUMN impacts SET NOT NULL")
        for name in ("048_slim_blocks.sql", "054_merge_dead_groups.sql"):
            await conn.execute((SQL_DIR / name).read_text().format(**fmt))


@pytest.mark.usefixtures("owner")
async def test_blocks_written_before_the_upgrade_rank_the_same(
    own_database: str, tmp_path: Path, embedder: Any
) -> None:
    settings = make_settings(own_database, tmp_path)
    app = await Archivist.open(settings, embedder)
    try:
        sources = await _corpus(app)
        await _rewind(app)
        assert await app.db.pool.fetchval(SHORT) == 0
        before = sorted(await app.db.pool.fetch("SELECT * FROM chunk_postings"))
    finally:
        await app.close()
    app = await Archivist.open(settings, embedder)  # sql/058 runs again
    try:
        pool = app.db.pool
        assert await pool.fetchval("SELECT 1 FROM schema_migrations WHERE version = '058_slimmer_postings'") == 1
        long_blocks = await pool.fetchval(BROKEN)
        assert long_blocks > 0  # nothing rewritten: the old blocks read as they are
        assert sorted(await pool.fetch("SELECT * FROM chunk_postings")) == before
        await _assert_rankings(app, await _oracle(app))
        await _assert_all_mode(app)
        await _write(app, sources, 4)  # a merge rewrites the blocks it touches in the short form
        await _merge(app)
        assert await pool.fetchval(BROKEN) < long_blocks
        await _assert_rankings(app, await _oracle(app, stored_impacts=True))
        await _assert_all_mode(app)
        await _rebuild(app)
        assert await pool.fetchval(BROKEN) == 0
        await _assert_rankings(app, await _oracle(app))
    finally:
        await app.close()
