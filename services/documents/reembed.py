"""Switch a database to another embedding model: re-embed every chunk and rebuild the index."""

from __future__ import annotations

import asyncio
import logging

import asyncpg
from pgvector.asyncpg import register_vector

from services.core.database import (
    MIGRATION_LOCK_KEY,
    IndexConfig,
    ensure_vector_extension,
    read_index_config,
    resolve_dsn,
    write_index_config,
)
from services.core.settings import Settings
from services.documents import embedding_text
from services.embeddings import create_embedder, embed_documents_async

logger = logging.getLogger(__name__)
BATCH = 256


async def _retype_embeddings(conn: asyncpg.Connection, wanted: IndexConfig) -> None:
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK_KEY)
        await conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw_idx")
        await conn.execute(
            f"ALTER TABLE chunks ALTER COLUMN embedding DROP NOT NULL, "
            f"ALTER COLUMN embedding TYPE halfvec({int(wanted.embedding_dim)}) USING NULL"
        )
        await write_index_config(conn, wanted)


async def _embed_missing(conn: asyncpg.Connection, embedder) -> int:
    done = 0
    while True:
        rows = await conn.fetch(
            "SELECT c.id, c.text, c.heading_path, d.title FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE c.embedding IS NULL LIMIT $1",
            BATCH,
        )
        if not rows:
            return done
        texts = [embedding_text(r["title"], list(r["heading_path"]), r["text"]) for r in rows]
        vectors = await embed_documents_async(embedder, texts)
        await conn.executemany(
            "UPDATE chunks SET embedding = $2, embedded_at = clock_timestamp() WHERE id = $1",
            [(r["id"], v) for r, v in zip(rows, vectors, strict=True)],
        )
        done += len(rows)
        logger.info("re-embedded %d chunks", done)


async def reembed_all(settings: Settings) -> int:
    """Re-embed with the configured model; safe to re-run after an interruption. Returns chunks embedded."""
    embedder = await asyncio.to_thread(create_embedder, settings)
    wanted = IndexConfig(embedder.name, embedder.dim, settings.fts_config)
    dsn = await resolve_dsn(settings)
    await ensure_vector_extension(dsn)
    conn = await asyncpg.connect(dsn)
    try:
        await register_vector(conn)
        stored = await read_index_config(conn)
        if stored is None:
            logger.info("no database content yet: nothing to re-embed")
            return 0
        if (stored.embedding_model, stored.embedding_dim) != (wanted.embedding_model, wanted.embedding_dim):
            await _retype_embeddings(conn, IndexConfig(wanted.embedding_model, wanted.embedding_dim, stored.fts_config))
        count = await _embed_missing(conn, embedder)
        await conn.execute(
            "CREATE INDEX IF NOT EXISTS chunks_embedding_hnsw_idx ON chunks USING hnsw (embedding halfvec_cosine_ops)"
        )
        logger.info("re-embedded %d chunks with %s", count, embedder.name)
        return count
    finally:
        await conn.close()
