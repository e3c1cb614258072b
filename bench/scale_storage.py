"""bench/scale.py's storage and restart figures (issue 37): bytes per chunk for each kind of data, and
search latency right after a restart of PostgreSQL with its files evicted from the page cache.

Bytes per chunk: `chunks` (the table and its TOAST, without the vectors), `vectors` (the embedding
column, pg_column_size over a sample), `postings` (the BM25 tables and their indexes), `hnsw`, `gin`,
`other` (the rest of the database: documents, B-trees of chunks, catalogs).

A restart: the app is closed (the embedded server stops when its last user goes), every file of the
data directory is evicted from the operating system's page cache with posix_fadvise(DONTNEED) (our
own files only: nothing machine-wide such as drop_caches on a shared machine), the server is started
again, and the first queries are timed, with the warm start (services/search/warm.py) let finish first
or not run at all.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

#: The BM25 postings (sql/042), with their indexes and TOAST.
POSTINGS_TABLES = ("chunk_seqs", "term_blocks", "term_delta", "term_dead", "bm25_totals")
SIZES_SQL = """
SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
FROM pg_class c WHERE c.relkind = 'r' AND c.relname = ANY($1::text[])
"""
POSTINGS_BYTES_SQL = SIZES_SQL
POSTINGS_COUNT_SQL = (
    "SELECT (SELECT coalesce(sum(n), 0) FROM term_blocks) + (SELECT count(*) FROM term_delta)"
    " - (SELECT count(*) FROM term_dead)"
)
VECTOR_BYTES_SQL = (
    "SELECT coalesce(avg(pg_column_size(embedding)), 0)::float8 FROM (SELECT embedding FROM chunks LIMIT 5000) s"
)


async def bytes_per_chunk(app: Any, hnsw: str, gin: str) -> dict[str, Any]:
    pool = app.db.pool
    chunks = int(await pool.fetchval("SELECT count(*) FROM chunks")) or 1
    size = "SELECT coalesce(pg_relation_size(to_regclass($1)), 0)::bigint"
    database = int(await pool.fetchval("SELECT pg_database_size(current_database())"))
    heap = int(await pool.fetchval("SELECT pg_table_size('chunks'::regclass)"))  # heap + TOAST + maps
    vectors = float(await pool.fetchval(VECTOR_BYTES_SQL)) * chunks
    postings = int(await pool.fetchval(SIZES_SQL, list(POSTINGS_TABLES)))
    hnsw_bytes, gin_bytes = int(await pool.fetchval(size, hnsw)), int(await pool.fetchval(size, gin))
    parts = {
        "chunks": heap - vectors,
        "vectors": vectors,
        "postings": postings,
        "hnsw": hnsw_bytes,
        "gin": gin_bytes,
    }
    parts["other"] = database - sum(parts.values())
    out: dict[str, Any] = {k: round(v / chunks) for k, v in parts.items()}
    out["total"] = round(database / chunks)
    out["database_mb"] = database >> 20
    return out


def evict_page_cache(data_dir: Path) -> int:
    """posix_fadvise(DONTNEED) on every file under `data_dir`; returns the bytes advised."""
    advised = 0
    for root, _dirs, files in os.walk(data_dir):
        for name in files:
            path = os.path.join(root, name)
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                advised += os.fstat(fd).st_size
            finally:
                os.close(fd)
    return advised


async def after_restart(settings: Any, embedder: Any, queries: list[str], strategies: list[str], warm: bool) -> dict:
    """p50/p95 (search only, ms) of the first queries after a restart with a cold page cache; `warm`:
    the warm start runs to its end before the first query (as it would while an agent connects)."""
    from bench.metrics import percentile
    from services.app import Archivist
    from services.search.base import SearchRequest
    from services.search.warm import warm_search_indexes

    vectors = [embedder.embed_query(q) for q in queries]
    out: dict[str, Any] = {}
    for name in strategies:
        evict_page_cache(Path(settings.data_dir) / "pgdata")  # the app is closed: the server is stopped
        app = await Archivist.open(settings, embedder)
        try:
            if warm:
                started = time.perf_counter()
                warmed = await warm_search_indexes(app.db)
                out["warm_seconds"] = round(time.perf_counter() - started, 1)
                out["warm_mb"] = warmed.bytes >> 20
            strategy = app.search.strategy(name)
            times = []
            for text, vec in zip(queries, vectors, strict=True):
                start = time.perf_counter()
                await strategy.search(SearchRequest(text, vec, 10, None))
                times.append((time.perf_counter() - start) * 1000)
            out[name] = {"p50_ms": round(percentile(times, 50), 1), "p95_ms": round(percentile(times, 95), 1)}
        finally:
            await app.close()
    return out
