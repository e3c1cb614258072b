"""The GIN index over chunks.tsv exists only with keyword_ranking = "ts_rank" (issue 37): each start makes
it match the setting (services/search/keyword_index.py), and the ts_rank leg that reads it still works."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from services.app import Archivist
from services.search import keyword_index
from services.search.base import SearchRequest
from services.search.hybrid import HybridSearch
from services.search.keyword_index import GIN_INDEX, match_keyword_index
from tests.conftest import make_settings

HAS_GIN = "SELECT to_regclass($1) IS NOT NULL"


async def _has_gin(app: Archivist) -> bool:
    return bool(await app.db.pool.fetchval(HAS_GIN, GIN_INDEX))


async def test_the_default_database_has_no_tsv_gin(app: Archivist) -> None:
    assert app.settings.keyword_ranking == "bm25"
    assert not await _has_gin(app)
    assert await match_keyword_index(app.db, "bm25") == "kept"


@pytest.mark.usefixtures("owner")
async def test_ts_rank_builds_the_gin_and_its_leg_finds_the_page(
    app: Archivist, database_url: str, files_dir: Path, embedder: Any
) -> None:
    source = await app.sources.create("ts_rank index")
    await app.documents.create_from_text(source.id, "Celadon glazes owe their green to iron oxide.", title="glaze")
    await app.documents.create_from_text(source.id, "Sourdough rises with wild yeast.", title="bread")
    ts_rank = await Archivist.open(make_settings(database_url, files_dir, keyword_ranking="ts_rank"), embedder)
    try:
        assert await _has_gin(ts_rank)
        query = "celadon iron oxide"
        vector = await asyncio.to_thread(embedder.embed_query, query)
        hits = await HybridSearch(ts_rank.db, ts_rank.settings).search(SearchRequest(query, vector, 2, [source.id]))
        assert hits[0].document_title == "glaze" and hits[0].match_type == "hybrid"
        keyword = await ts_rank.search.strategy("keyword").search(SearchRequest(query, vector, 2, [source.id]))
        assert [h.document_title for h in keyword] == ["glaze"]
    finally:
        await ts_rank.close()
    assert await match_keyword_index(app.db, "bm25") == "dropped"  # the next BM25 start drops it again
    assert not await _has_gin(app)


async def test_a_busy_chunks_table_leaves_the_index_for_the_next_start(
    app: Archivist, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyword_index, "LOCK_TIMEOUT", "200ms")
    writer = await asyncpg.connect(database_url)
    try:
        async with writer.transaction():  # a long write holds ROW EXCLUSIVE on chunks: CREATE INDEX waits
            await writer.execute("LOCK TABLE chunks IN ROW EXCLUSIVE MODE")
            assert await match_keyword_index(app.db, "ts_rank") == "busy"
        assert not await _has_gin(app)
        assert await match_keyword_index(app.db, "ts_rank") == "built"
        assert await match_keyword_index(app.db, "bm25") == "dropped"
    finally:
        await writer.close()
