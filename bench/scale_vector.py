"""bench/scale.py's vector-leg recall: HNSW at several hnsw.ef_search values, and optionally a
binary-quantised HNSW index with exact re-ranking, against exact search (index scans off).

Exact neighbours are cached in the corpus' data directory (a sequential scan of a million vectors
per query is the slow part), keyed by the number of queries and the source filter.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.metrics import percentile
from services.app import Archivist
from services.search.breadth import SearchBreadth

ANN_SQL = """
SELECT id, embedding <=> $1 AS dist FROM chunks WHERE ($2::uuid IS NULL OR source_id = $2)
ORDER BY embedding <=> $1 LIMIT $3
"""
# Different text on purpose: a prepared statement keeps the plan it was made with, and this one is
# planned with index scans off.
EXACT_SQL = "/* exact */" + ANN_SQL

# Binary quantisation: one bit per dimension (its sign), Hamming distance in an HNSW index, then the
# $4 nearest by Hamming re-ranked by exact cosine distance.
BIT_INDEX = "chunks_embedding_bit_hnsw_idx"
BIT_INDEX_SQL = (
    f"CREATE INDEX IF NOT EXISTS {BIT_INDEX} ON chunks USING hnsw "
    "((binary_quantize(embedding)::bit({dim})) bit_hamming_ops)"
)
BIT_SQL = """
SELECT id, dist FROM (
    SELECT id, embedding <=> $1 AS dist FROM (
        SELECT id, embedding FROM chunks WHERE ($2::uuid IS NULL OR source_id = $2)
        ORDER BY binary_quantize(embedding)::bit({dim}) <~> binary_quantize($1::vector) LIMIT $4
    ) b
) r ORDER BY dist LIMIT $3
"""


def recall_scores(found: list[Any], exact: list[Any]) -> tuple[float, float, float]:
    """recall@k by id, and ann-benchmarks' distance recall: the share of returned rows no farther than
    the exact k-th neighbour times (1 + eps), for eps 1e-3 and 1e-2. The synthetic corpus holds ~190
    noisy copies of each passage, so many true neighbours are near ties and id recall understates."""
    truth = {r["id"] for r in exact}
    kth = max(r["dist"] for r in exact)
    by_id = len({r["id"] for r in found} & truth) / max(len(truth), 1)
    within = [sum(r["dist"] <= kth * (1 + eps) for r in found) / max(len(exact), 1) for eps in (1e-3, 1e-2)]
    return by_id, within[0], within[1]


async def exact_neighbours(
    app: Archivist, vectors: list[np.ndarray], source_id: uuid.UUID | None, cache_dir: Path | None
) -> list[list[dict]]:
    cache = cache_dir / f"exact-{len(vectors)}-{source_id or 'all'}.json" if cache_dir else None
    if cache and cache.is_file():
        return [[{"id": uuid.UUID(r["id"]), "dist": r["dist"]} for r in rows] for rows in json.loads(cache.read_text())]
    exact = []
    async with app.db.pool.acquire() as conn:
        for vec in vectors:
            async with conn.transaction():
                await conn.execute("SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off")
                exact.append([dict(r) for r in await conn.fetch(EXACT_SQL, vec, source_id, 10)])
    if cache:
        cache.write_text(json.dumps([[{"id": str(r["id"]), "dist": r["dist"]} for r in rows] for rows in exact]))
    return exact


def summary(scores: list[tuple[float, float, float]], times: list[float]) -> dict[str, float]:
    by_id, eps3, eps2 = (round(float(np.mean([s[i] for s in scores])), 4) for i in range(3))
    return {
        "recall_at_10": by_id,
        "distance_recall_eps1e-3": eps3,
        "distance_recall_eps1e-2": eps2,
        "p50_ms": round(percentile(times, 50), 1),
        "p95_ms": round(percentile(times, 95), 1),
    }


async def vector_recall(
    app: Archivist,
    vectors: list[np.ndarray],
    source_id: uuid.UUID | None,
    ef_values: Sequence[int],
    cache_dir: Path | None = None,
    bit_candidates: Sequence[int] = (),
) -> dict[str, Any]:
    """recall@10 and SQL latency of the HNSW vector leg per ef_search (and of the binary-quantised
    index per candidate count, when it exists), against exact search."""
    exact = await exact_neighbours(app, vectors, source_id, cache_dir)
    out: dict[str, Any] = {"queries": len(vectors)}
    dim = int(vectors[0].shape[0])
    async with app.db.pool.acquire() as conn:
        for ef in ef_values:
            scores, times = [], []
            async with conn.transaction():
                await conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef)}")
                for vec, truth in zip(vectors, exact, strict=True):
                    start = time.perf_counter()
                    found = await conn.fetch(ANN_SQL, vec, source_id, 10)
                    times.append((time.perf_counter() - start) * 1000)
                    scores.append(recall_scores(found, truth))
            out[f"ef{ef}"] = summary(scores, times)
        scores, times = [], []  # the shipped defaults: the vector leg as it runs (services/search/breadth.py)
        out["defaults_ef_search"] = await SearchBreadth.of(app.db).ef_search(source_id is not None)
        for vec, truth in zip(vectors, exact, strict=True):
            start = time.perf_counter()
            async with SearchBreadth.of(app.db).connection(source_id is not None) as breadth:
                found = await breadth.fetch(ANN_SQL, vec, source_id, 10)
            times.append((time.perf_counter() - start) * 1000)
            scores.append(recall_scores(found, truth))
        out["defaults"] = summary(scores, times)
        has_bit = await conn.fetchval("SELECT count(*) FROM pg_indexes WHERE indexname = $1", BIT_INDEX)
        for cand in bit_candidates if has_bit else ():
            scores, times = [], []
            async with conn.transaction():
                await conn.execute(f"SET LOCAL hnsw.ef_search = {max(int(cand), 40)}")
                for vec, truth in zip(vectors, exact, strict=True):
                    start = time.perf_counter()
                    found = await conn.fetch(BIT_SQL.format(dim=dim), vec, source_id, 10, int(cand))
                    times.append((time.perf_counter() - start) * 1000)
                    scores.append(recall_scores(found, truth))
            out[f"binary{cand}"] = summary(scores, times)
    return out


async def build_bit_index(app: Archivist, dim: int, maintenance_work_mem: str) -> float:
    """Create the binary-quantised HNSW index (an experiment: the service does not create it)."""
    start = time.perf_counter()
    async with app.db.pool.acquire() as conn:
        await conn.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
        await conn.execute(BIT_INDEX_SQL.format(dim=dim))
    return round(time.perf_counter() - start, 1)
