"""Half-size vectors (issue 37): chunks' embeddings are pgvector `halfvec`, the HNSW graph uses
halfvec_cosine_ops, and a knowledge base written by the previous release (float32 `vector`) is
converted in place when the server starts: same results, and a failed conversion changes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from services.app import Archivist
from tests.conftest import fresh_database, make_settings

NOTES = {
    "Lanterns": "Trim the wick before lighting, and keep the glass chimney clean of soot.",
    "Tides": "Spring tides follow the full and new moon; neap tides fall between them.",
    "Knots": "A bowline makes a fixed loop that neither slips nor jams under load.",
    "Charts": "Soundings on a chart are given at the lowest astronomical tide.",
    "Weather": "A falling barometer and a backing wind warn of an approaching depression.",
    "Patching": "Use mock.patch.object(Target, 'method') to replace one attribute for the test.",
}
QUERIES = ["how do I keep a lamp clean", "when are tides highest", "a loop that does not slip", "storm warning"]

COLUMN_TYPE = (
    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
    "WHERE attrelid = 'chunks'::regclass AND attname = 'embedding'"
)
INDEX_OPCLASS = (
    "SELECT o.opcname FROM pg_index i JOIN pg_opclass o ON o.oid = i.indclass[0] "
    "WHERE i.indexrelid = 'chunks_embedding_hnsw_idx'::regclass"
)


async def _to_previous_release(url: str, dim: int) -> None:
    """The layout before sql/039: float32 vectors and a vector_cosine_ops graph."""
    conn = await asyncpg.connect(url)
    try:
        async with conn.transaction():
            await conn.execute("DROP INDEX chunks_embedding_hnsw_idx")
            await conn.execute(f"ALTER TABLE chunks ALTER COLUMN embedding TYPE vector({dim}) USING embedding::vector")
            await conn.execute(
                "CREATE INDEX chunks_embedding_hnsw_idx ON chunks USING hnsw (embedding vector_cosine_ops)"
            )
            await conn.execute("DELETE FROM schema_migrations WHERE version = '039_halfvec_embeddings'")
    finally:
        await conn.close()


async def _layout(url: str) -> tuple[str, str]:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval(COLUMN_TYPE), await conn.fetchval(INDEX_OPCLASS)
    finally:
        await conn.close()


async def _rankings(app: Archivist, source_id: Any) -> dict[str, list[str]]:
    found = {}
    for query in QUERIES:
        outcome = await app.search.search(query, source_id, 5, "vector")
        found[query] = [h.document_title for h in outcome.hits]
    return found


@pytest.fixture
async def own_database(pg_server: Any) -> AsyncIterator[str]:
    async with fresh_database(pg_server) as url:
        yield url


@pytest.mark.usefixtures("owner")
async def test_new_databases_store_halfvec(own_database: str, tmp_path: Path, embedder: Any) -> None:
    app = await Archivist.open(make_settings(own_database, tmp_path), embedder)
    await app.close()
    assert await _layout(own_database) == (f"halfvec({embedder.dim})", "halfvec_cosine_ops")


EXACT_FLOAT32 = (
    "SELECT d.title FROM chunks c JOIN documents d ON d.id = c.document_id "
    "ORDER BY c.embedding <=> $1::float4[]::vector, c.id LIMIT 5"
)


async def _exact_float32(url: str, embedder: Any) -> dict[str, list[str]]:
    """The previous release's answers: exact float32 cosine order over its own column."""
    conn = await asyncpg.connect(url)
    try:
        return {
            q: [r["title"] for r in await conn.fetch(EXACT_FLOAT32, embedder.embed_query(q).tolist())] for q in QUERIES
        }
    finally:
        await conn.close()


@pytest.mark.usefixtures("owner")
async def test_a_previous_release_database_is_converted_in_place(
    own_database: str, tmp_path: Path, embedder: Any
) -> None:
    settings = make_settings(own_database, tmp_path)
    app = await Archivist.open(settings, embedder)
    try:
        source = await app.sources.create(title="Keeper notes")
        for title, text in NOTES.items():
            await app.documents.create_from_text(source.id, text, title)
        chunks = await app.db.pool.fetchval("SELECT count(*) FROM chunks WHERE embedding IS NOT NULL")
    finally:
        await app.close()
    await _to_previous_release(own_database, embedder.dim)
    assert await _layout(own_database) == (f"vector({embedder.dim})", "vector_cosine_ops")
    before = await _exact_float32(own_database, embedder)
    app = await Archivist.open(settings, embedder)  # converts in place
    try:
        after = await _rankings(app, source.id)
        assert await app.db.pool.fetchval("SELECT count(*) FROM chunks WHERE embedding IS NOT NULL") == chunks
    finally:
        await app.close()
    assert await _layout(own_database) == (f"halfvec({embedder.dim})", "halfvec_cosine_ops")
    assert after == before
    assert all(after[q] for q in QUERIES)


@pytest.mark.usefixtures("owner")
async def test_a_failed_conversion_leaves_the_old_layout(own_database: str, tmp_path: Path, embedder: Any) -> None:
    settings = make_settings(own_database, tmp_path)
    app = await Archivist.open(settings, embedder)
    try:
        source = await app.sources.create(title="Keeper notes")
        await app.documents.create_from_text(source.id, NOTES["Knots"], "Knots")
    finally:
        await app.close()
    await _to_previous_release(own_database, embedder.dim)
    conn = await asyncpg.connect(own_database)
    try:  # a float32 value no half-precision number can hold makes the conversion fail
        await conn.execute("UPDATE chunks SET embedding = array_fill(1e6::real, ARRAY[$1::int])::vector", embedder.dim)
    finally:
        await conn.close()
    with pytest.raises(asyncpg.PostgresError):
        await Archivist.open(settings, embedder)
    assert await _layout(own_database) == (f"vector({embedder.dim})", "vector_cosine_ops")
    conn = await asyncpg.connect(own_database)
    try:
        assert await conn.fetchval("SELECT count(*) FROM chunks WHERE embedding IS NOT NULL") >= 1
        assert not await conn.fetchval("SELECT count(*) FROM schema_migrations WHERE version LIKE '039%'")
    finally:
        await conn.close()
