"""Search latency at 10k / 100k (/ 1M) chunks, and a check that the HNSW and GIN indexes are used.

    .venv/bin/python bench/scale.py \\
        --queries ../shared/data/scifact/queries.jsonl --sizes 10000,100000 --out bench/.cache/scale.json

The synthetic corpus (bench/scale_build.py) is real SciFact text with real vectors plus noise,
loaded with COPY, the indexes and the BM25 postings built after loading. Queries are real SciFact
queries embedded by the same model; latency is measured server side, one query at a time: query
embedding + the strategy's search (limit 10), after a warm-up. Settings come from the environment
as for the server (e.g. ARCHIVIST_HNSW_EF_SEARCH=400, ARCHIVIST_BM25_POSTINGS_PER_TERM=0).

Each size gets its own embedded PostgreSQL under bench/.cache/scale-<model>-<size>, reused on re-runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.beir_data import read_queries  # noqa: E402
from bench.common import CACHE_DIR, machine_info, settings_summary, slug  # noqa: E402
from bench.metrics import percentile  # noqa: E402
from bench.scale_build import GIN_INDEX, HNSW_INDEX, load_chunks, load_passages  # noqa: E402
from bench.scale_keyword import keyword_agreement, keyword_matches  # noqa: E402
from bench.scale_storage import (  # noqa: E402
    POSTINGS_BYTES_SQL,
    POSTINGS_COUNT_SQL,
    POSTINGS_TABLES,
    after_restart,
    bytes_per_chunk,
)
from bench.scale_vector import build_bit_index, vector_recall  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from services.embeddings import create_embedder  # noqa: E402
from services.search.base import SearchRequest, SearchStrategy  # noqa: E402
from services.search.hybrid import HybridSearch  # noqa: E402
from services.search.rerank import RerankSearch  # noqa: E402
from services.search.vector import VECTOR_SQL, VectorSearch  # noqa: E402

logger = logging.getLogger("bench.scale")


# --- measurements ----------------------------------------------------------------------------------------


def plan_indexes(plan: Any) -> set[str]:
    """Every index name appearing in an EXPLAIN (FORMAT JSON) plan."""
    found: set[str] = set()
    if isinstance(plan, dict):
        if "Index Name" in plan:
            found.add(plan["Index Name"])
        for value in plan.values():
            found |= plan_indexes(value)
    elif isinstance(plan, list):
        for item in plan:
            found |= plan_indexes(item)
    return found


async def explain_indexes(app: Archivist, sql: str, *params: Any) -> set[str]:
    async with app.db.pool.acquire() as conn:
        raw = await conn.fetchval("EXPLAIN (FORMAT JSON) " + sql, *params)
    plan = json.loads(raw) if isinstance(raw, str) else raw
    return plan_indexes(plan)


async def check_indexes(app: Archivist, query: str, vector: np.ndarray, source_id: uuid.UUID | None) -> dict:
    """Whether the vector and hybrid queries use the HNSW and GIN indexes (with and without a source filter)."""
    hybrid = HybridSearch(app.db, app.settings)
    (keywords, *bm25), _ = await hybrid.keyword_args(query)
    vec = await explain_indexes(app, VECTOR_SQL, vector, source_id and [source_id], 10)
    hyb = await explain_indexes(app, hybrid._sql(), *hybrid_params(app.settings, vector, source_id, keywords, bm25))
    return {
        "vector_uses_hnsw": HNSW_INDEX in vec,
        "hybrid_uses_hnsw": HNSW_INDEX in hyb,
        "hybrid_uses_gin": GIN_INDEX in hyb,
        "hybrid_uses_term_blocks_idx": "term_blocks_term_idx" in hyb,  # the postings' blocks (sql/042)
        "hybrid_uses_chunk_seqs_pkey": "chunk_seqs_pkey" in hyb,  # candidates' seqs to chunks
        "vector_plan_indexes": sorted(vec),
        "hybrid_plan_indexes": sorted(hyb),
    }


async def chunk_count(app: Archivist) -> int:
    return await app.db.pool.fetchval("SELECT count(*) FROM chunks")


async def storage_sizes(app: Archivist) -> dict[str, Any]:
    mb = "SELECT round(coalesce(pg_relation_size(to_regclass($1)), 0) / 1048576.0)::int"  # 0: not there
    out: dict[str, Any] = {
        "chunks_table_total_mb": await app.db.pool.fetchval(
            "SELECT round(pg_total_relation_size('chunks'::regclass) / 1048576.0)::int"
        ),
        "postings_total_mb": round(await app.db.pool.fetchval(POSTINGS_BYTES_SQL, list(POSTINGS_TABLES)) / 1048576),
        "postings": await app.db.pool.fetchval(POSTINGS_COUNT_SQL),
    }
    out["postings_bytes_each"] = round(
        await app.db.pool.fetchval(POSTINGS_BYTES_SQL, list(POSTINGS_TABLES)) / max(out["postings"], 1), 1
    )
    for name in (HNSW_INDEX, GIN_INDEX, "term_blocks", "term_blocks_term_idx", "chunk_seqs", "chunk_seqs_pkey"):
        out[f"{name}_mb"] = await app.db.pool.fetchval(mb, name)
    return out


def hybrid_params(s: Settings, vector: np.ndarray, source_id: Any, keywords: Any, bm25: list) -> tuple:
    """The hybrid SQL's parameters as HybridSearch.fused_rows passes them (limit 10)."""
    weights = (float(s.hybrid_vector_weight), float(s.hybrid_keyword_weight), float(s.rrf_k))
    return (vector, source_id and [source_id], s.hybrid_candidates, keywords, *weights, 10, *bm25)


async def query_plans(app: Archivist, query: str, vector: np.ndarray, source_id: uuid.UUID | None) -> dict[str, str]:
    """EXPLAIN (ANALYZE, BUFFERS) of the vector and hybrid SQL (one query), as text."""
    hybrid = HybridSearch(app.db, app.settings)
    (keywords, *bm25), _ = await hybrid.keyword_args(query)
    plans = {}
    async with app.db.pool.acquire() as conn:
        for label, sql, params in (
            ("vector", VECTOR_SQL, (vector, source_id and [source_id], 10)),
            ("hybrid", hybrid._sql(), hybrid_params(app.settings, vector, source_id, keywords, bm25)),
        ):
            rows = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, SUMMARY ON) " + sql, *params)
            plans[label] = "\n".join(r[0] for r in rows)
    return plans


async def time_strategy(
    strategy: SearchStrategy, queries: list[str], vectors: list[np.ndarray], embed_ms: list[float], source_id: Any
) -> dict[str, float]:
    """p50/p95 of embedding + search (ms) per query, one at a time after a warm-up pass of 3 queries."""
    for text, vec in list(zip(queries, vectors, strict=True))[:3]:
        await strategy.search(SearchRequest(text, vec, 10, source_id and [source_id]))
    total, search = [], []
    for text, vec, emb in zip(queries, vectors, embed_ms, strict=True):
        start = time.perf_counter()
        await strategy.search(SearchRequest(text, vec, 10, source_id and [source_id]))
        elapsed = (time.perf_counter() - start) * 1000
        search.append(elapsed)
        total.append(elapsed + emb)
    return {
        "p50_ms": round(percentile(total, 50), 1),
        "p95_ms": round(percentile(total, 95), 1),
        "search_only_p50_ms": round(percentile(search, 50), 1),
        "search_only_p95_ms": round(percentile(search, 95), 1),
        "queries": len(queries),
    }


async def measure_size(
    settings: Settings, embedder: Any, size: int, pairs: Sequence, vectors: np.ndarray, queries: list[str], args: Any
) -> dict[str, Any]:
    data_dir = args.cache_dir / f"scale-{slug(embedder.name)}-{size}"
    sized = settings.model_copy(update={"database_url": None, "data_dir": data_dir})
    app = await Archivist.open(sized, embedder)
    build_file = data_dir / "build.json"
    try:
        have = await chunk_count(app)
        if have != size:
            if have:
                raise SystemExit(f"{sized.data_dir} holds {have} chunks, not {size}: delete it to rebuild")
            build_file.write_text(json.dumps(await load_chunks(app, size, pairs, vectors, seed=size, args=args)))
        if args.build_only:
            return {"chunks": size, "build": json.loads(build_file.read_text()), "storage": await storage_sizes(app)}
        qvecs, embed_ms = [], []
        for q in queries:
            start = time.perf_counter()
            qvecs.append(embedder.embed_query(q))
            embed_ms.append((time.perf_counter() - start) * 1000)
        source_id = await app.db.pool.fetchval("SELECT id FROM sources ORDER BY created_at LIMIT 1")
        result: dict[str, Any] = {"chunks": size, "query_embed_p50_ms": round(percentile(embed_ms, 50), 1)}
        result["build"] = json.loads(build_file.read_text()) if build_file.is_file() else None
        result["sources"] = await app.db.pool.fetchval("SELECT count(*) FROM sources")
        result["storage"] = await storage_sizes(app)
        result["bytes_per_chunk"] = await bytes_per_chunk(app, HNSW_INDEX, GIN_INDEX)
        result["indexes"] = await check_indexes(app, queries[0], qvecs[0], None)
        result["indexes_with_source_filter"] = await check_indexes(app, queries[0], qvecs[0], source_id)
        result["keyword_leg"] = await keyword_matches(app, queries[:50])
        if args.agreement_queries and app.settings.keyword_ranking == "bm25":
            sample = queries[: args.agreement_queries]
            result["keyword_agreement"] = await keyword_agreement(app, sample, None)
            if args.with_source_filter:
                result["keyword_agreement_source"] = await keyword_agreement(app, sample, source_id)
        if args.bit_index:
            result["bit_index_build_seconds"] = await build_bit_index(app, len(qvecs[0]), args.maintenance_work_mem)
        if args.recall_queries:
            sample = qvecs[: args.recall_queries]
            result["vector_recall"] = await vector_recall(
                app, sample, None, args.ef_search, data_dir, args.bit_candidates
            )
            if args.with_source_filter:
                result["vector_recall_source"] = await vector_recall(
                    app, sample, source_id, args.ef_search, data_dir, args.bit_candidates
                )
        if args.plans:
            result["plans"] = await query_plans(app, queries[0], qvecs[0], None)
            result["plans_source"] = await query_plans(app, queries[0], qvecs[0], source_id)
        for name in args.strategies:
            n = args.rerank_queries if name == "rerank" else len(queries)
            strategy = build_strategy(app, name)
            for filt_label, filt in (("all", None), ("source", source_id)):
                if filt_label == "source" and not args.with_source_filter:
                    continue
                label = name if filt_label == "all" else f"{name}+source"
                result[label] = await time_strategy(strategy, queries[:n], qvecs[:n], embed_ms[:n], filt)
                logger.info("%d chunks %s: %s", size, label, result[label])
        return result
    finally:
        await app.close()


def build_strategy(app: Archivist, name: str) -> SearchStrategy:
    if name == "keyword":
        return app.search.strategy("keyword")
    if name == "vector":
        return VectorSearch(app.db)
    hybrid = HybridSearch(app.db, app.settings)
    if name == "hybrid":
        return hybrid
    return RerankSearch(hybrid, app.reranker(), app.settings)


def growth(results: list[dict[str, Any]], strategies: Sequence[str]) -> dict[str, str]:
    """Latency ratio between consecutive sizes, per strategy (search-only p50)."""
    out = {}
    for name in strategies:
        steps = []
        for small, big in zip(results, results[1:], strict=False):
            if name in small and name in big and small[name]["search_only_p50_ms"]:
                ratio = big[name]["search_only_p50_ms"] / small[name]["search_only_p50_ms"]
                steps.append(f"{small['chunks']}->{big['chunks']}: x{ratio:.2f}")
        out[name] = "; ".join(steps)
    return out


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Archivist search latency at scale")
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--vectors", type=Path, help="passage-vector file from bench/beir.py (default: by model)")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--strategies", default="vector,hybrid,rerank")
    parser.add_argument("--num-queries", type=int, default=200)
    parser.add_argument("--rerank-queries", type=int, default=50)
    parser.add_argument("--with-source-filter", action="store_true", help="also time searches scoped to a source")
    parser.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    parser.add_argument("--sources", type=int, default=1, help="sources the corpus is spread over (filter: one)")
    parser.add_argument("--recall-queries", type=int, default=0, help="measure vector recall@10 vs exact search")
    parser.add_argument("--ef-search", default="100", help="hnsw.ef_search values for the recall sweep")
    parser.add_argument("--plans", action="store_true", help="record EXPLAIN ANALYZE of the vector and hybrid SQL")
    parser.add_argument(
        "--agreement-queries", type=int, default=0, help="compare the impact-ordered BM25 leg with exhaustive BM25"
    )
    parser.add_argument("--bit-index", action="store_true", help="experiment: add a binary-quantised HNSW index")
    parser.add_argument("--bit-candidates", default="", help="Hamming candidates re-ranked, for the recall sweep")
    parser.add_argument("--restart-queries", type=int, default=0, help="time the first N queries after a restart")
    parser.add_argument("--build-only", action="store_true", help="build the corpora (untimed) and stop")
    parser.add_argument("--maintenance-work-mem", default="1GB")
    parser.add_argument("--parallel-workers", type=int, default=1)
    parser.add_argument("--copy-streams", type=int, default=2, help="connections loading the chunks at once")
    parser.add_argument("--postings-parts", type=int, default=2, help="connections building the postings at once")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    args.ef_search = [int(v) for v in str(args.ef_search).split(",") if v.strip()]
    args.bit_candidates = [int(v) for v in str(args.bit_candidates).split(",") if v.strip()]
    return args


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings()
    embedder = await asyncio.to_thread(create_embedder, settings)
    vectors_file = args.vectors or (
        args.cache_dir / f"vectors-{slug(embedder.name)}-c{settings.chunk_size}o{settings.chunk_overlap}.npz"
    )
    if not vectors_file.is_file():
        raise SystemExit(f"{vectors_file} not found: run bench/beir.py with this model first")
    pairs, vectors = load_passages(vectors_file)
    queries = list(read_queries(args.queries).values())[: args.num_queries]
    results = []
    for size in args.sizes:
        results.append(await measure_size(settings, embedder, size, pairs, vectors, queries, args))
        if args.restart_queries:  # the first queries after a restart, cold page cache, without and with warm start
            sized = settings.model_copy(
                update={"database_url": None, "data_dir": args.cache_dir / f"scale-{slug(embedder.name)}-{size}"}
            )
            first = queries[: args.restart_queries]
            names = [n for n in args.strategies if n != "rerank"]
            results[-1]["after_restart"] = await after_restart(sized, embedder, first, names, warm=False)
            results[-1]["after_restart_warmed"] = await after_restart(sized, embedder, first, names, warm=True)
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "settings": settings_summary(settings),
        "sizes": results,
        "growth_search_only_p50": growth(results, args.strategies),
    }


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args = parse_args(argv)
    with use_scope(Scope.owner()):  # a benchmark runs as the local owner
        report = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str))
    print(f"\n{report['date']}  {report['machine']['cpu']} ({report['machine']['cores']} cores)")
    for size in report["sizes"]:
        print(f"\n{size['chunks']} chunks  (query embedding p50 {size.get('query_embed_p50_ms')} ms)")
        for key in (
            "build",
            "bytes_per_chunk",
            "after_restart",
            "after_restart_warmed",
            "storage",
            "sources",
            "indexes",
            "indexes_with_source_filter",
            "keyword_leg",
        ):
            if size.get(key) is not None:
                print(f"  {key}: {size[key]}")
        for key in (
            "bit_index_build_seconds",
            "vector_recall",
            "vector_recall_source",
            "keyword_agreement",
            "keyword_agreement_source",
        ):
            if key in size:
                print(f"  {key}: {size[key]}")
        for name, r in size.items():
            if isinstance(r, dict) and "search_only_p50_ms" in r:
                print(
                    f"  {name:<16} p50 {r['p50_ms']:>7.1f} ms  p95 {r['p95_ms']:>7.1f} ms   "
                    f"(search only p50 {r['search_only_p50_ms']:.1f} / p95 {r['search_only_p95_ms']:.1f})"
                )
        for key in ("plans", "plans_source"):
            for label, plan in (size.get(key) or {}).items():
                print(f"\n  {key} {label}:\n" + "\n".join("    " + line for line in plan.splitlines()))
    print(f"\ngrowth: {report['growth_search_only_p50']}")


if __name__ == "__main__":
    main()
