"""Search latency at 10k / 100k (/ 1M) chunks, and a check that the HNSW and GIN indexes are used.

    .venv/bin/python bench/scale.py \\
        --queries ../shared/data/scifact/queries.jsonl --sizes 10000,100000 --out bench/.cache/scale.json

The synthetic corpus is real text with real-looking vectors, built without embedding it for hours:

* chunk texts and their vectors come from the passage-vector file `bench/beir.py` saves after
  ingesting SciFact (`bench/.cache/vectors-<model>-c<size>o<overlap>.npz`); chunk i is passage
  i mod P, its vector perturbed with Gaussian noise (cosine ~0.9 to the original) and
  re-normalised, so copies are near neighbours but not duplicates, as in a real large corpus;
* rows are written with COPY into the schema the service creates (sql/ migrations, via
  `Archivist.open`), with the HNSW index dropped during the load and rebuilt afterwards (as a bulk
  load would), then ANALYZEd;
* queries are real SciFact queries embedded by the same model; latency is measured server side,
  one query at a time: query embedding + the strategy's search (limit 10), after a warm-up.

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

from bench.beir import CACHE_DIR, machine_info, read_queries, settings_summary, slug  # noqa: E402
from bench.metrics import percentile  # noqa: E402
from services.app import Archivist  # noqa: E402
from services.documents import CHUNK_COLUMNS  # noqa: E402
from services.embeddings import create_embedder  # noqa: E402
from services.search.base import SearchRequest, SearchStrategy  # noqa: E402
from services.search.hybrid import HybridSearch  # noqa: E402
from services.search.rerank import RerankSearch  # noqa: E402
from services.search.vector import VECTOR_SQL, VectorSearch  # noqa: E402
from services.settings import Settings  # noqa: E402

logger = logging.getLogger("bench.scale")

CHUNKS_PER_DOCUMENT = 5
COPY_BATCH = 20_000
NOISE_COSINE = 0.9
HNSW_INDEX = "chunks_embedding_hnsw_idx"
GIN_INDEX = "chunks_tsv_gin_idx"


# --- synthetic corpus ------------------------------------------------------------------------------------


def load_passages(path: Path) -> tuple[list[tuple[str, str]], np.ndarray]:
    """(title, text) pairs and unit vectors from a bench/beir.py passage-vector file."""
    with np.load(path, allow_pickle=False) as data:
        texts = data["texts"].tolist()
        vectors = np.asarray(data["vectors"], dtype=np.float32)
    pairs = []
    for embedded in texts:
        title, _, text = embedded.partition("\n\n")
        pairs.append((title, text or title))
    return pairs, vectors


def perturb(vectors: np.ndarray, rng: np.random.Generator, cosine: float = NOISE_COSINE) -> np.ndarray:
    """Unit vectors at roughly `cosine` similarity to the inputs (isotropic Gaussian noise)."""
    dim = vectors.shape[1]
    sigma = np.sqrt((1 / cosine**2 - 1) / dim)
    noisy = vectors + rng.normal(0.0, sigma, size=vectors.shape).astype(np.float32)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


async def chunk_count(app: Archivist) -> int:
    return await app.db.pool.fetchval("SELECT count(*) FROM chunks")


async def create_documents(
    app: Archivist, source_ids: list[uuid.UUID], count: int, pairs: Sequence
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """`count` documents spread round-robin over the sources; returns (document id, source id) pairs."""
    docs = [(uuid.uuid4(), source_ids[i % len(source_ids)]) for i in range(count)]
    records = [
        (doc_id, source_id, pairs[i % len(pairs)][0][:500], f"scale:{i}", "text", "", f"h{i}", CHUNKS_PER_DOCUMENT)
        for i, (doc_id, source_id) in enumerate(docs)
    ]
    async with app.db.pool.acquire() as conn:
        for start in range(0, len(records), COPY_BATCH):
            await conn.copy_records_to_table(
                "documents",
                records=records[start : start + COPY_BATCH],
                columns=["id", "source_id", "title", "url", "document_type", "content", "content_hash", "chunk_count"],
            )
    return docs


async def load_chunks(
    app: Archivist, size: int, pairs: Sequence, vectors: np.ndarray, seed: int, args: Any
) -> dict[str, Any]:
    """COPY `size` chunks (HNSW and GIN indexes dropped during the load, rebuilt after); build figures."""
    rng = np.random.default_rng(seed)
    sources = [
        await app.sources.create(f"scale-{size}-{i}", description="bench/scale.py synthetic corpus")
        for i in range(args.sources)
    ]
    started = time.perf_counter()
    docs = await create_documents(app, [src.id for src in sources], -(-size // CHUNKS_PER_DOCUMENT), pairs)
    async with app.db.pool.acquire() as conn:
        index_defs = [
            await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = $1", name)
            for name in (HNSW_INDEX, GIN_INDEX)
        ]
        for name in (HNSW_INDEX, GIN_INDEX):
            await conn.execute(f"DROP INDEX IF EXISTS {name}")
        for offset in range(0, size, COPY_BATCH):
            n = min(COPY_BATCH, size - offset)
            picks = (np.arange(offset, offset + n)) % len(pairs)
            noisy = perturb(vectors[picks], rng)
            records = []
            for j, p in enumerate(picks.tolist()):
                doc_id, source_id = docs[(offset + j) // CHUNKS_PER_DOCUMENT]
                text = pairs[p][1]
                records.append(
                    (
                        doc_id,
                        source_id,
                        (offset + j) % CHUNKS_PER_DOCUMENT,
                        text,
                        0,
                        len(text),
                        [],
                        pairs[p][0],
                        noisy[j],
                        None,  # page_start
                        None,  # page_end
                    )
                )
            await conn.copy_records_to_table("chunks", records=records, columns=CHUNK_COLUMNS)
            logger.info("copied %d/%d chunks (%.0fs)", offset + n, size, time.perf_counter() - started)
        copied = time.perf_counter()
        await conn.execute(f"SET maintenance_work_mem = '{args.maintenance_work_mem}'")
        await conn.execute(f"SET max_parallel_maintenance_workers = {int(args.parallel_workers)}")
        timings = {}
        for name, index_def in zip((GIN_INDEX, HNSW_INDEX), reversed(index_defs), strict=True):
            build = time.perf_counter()
            await conn.execute(index_def)
            timings[name] = round(time.perf_counter() - build, 1)
            logger.info("%s built in %.0fs", name, timings[name])
        await conn.execute("ANALYZE chunks")
        await conn.execute("ANALYZE documents")
    return {
        "copy_seconds": round(copied - started, 1),
        "gin_build_seconds": timings[GIN_INDEX],
        "hnsw_build_seconds": timings[HNSW_INDEX],
        "total_seconds": round(time.perf_counter() - started, 1),
        "sources": args.sources,
        "maintenance_work_mem": args.maintenance_work_mem,
        "parallel_maintenance_workers": args.parallel_workers,
    }


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
    s = app.settings
    keywords, *bm25 = await hybrid.keyword_args(query)
    hybrid_params = (vector, source_id, s.hybrid_candidates, keywords, 1.0, 1.0, float(s.rrf_k), 10, *bm25)
    vec = await explain_indexes(app, VECTOR_SQL, vector, source_id, 10)
    hyb = await explain_indexes(app, hybrid._sql(), *hybrid_params)
    return {
        "vector_uses_hnsw": HNSW_INDEX in vec,
        "hybrid_uses_hnsw": HNSW_INDEX in hyb,
        "hybrid_uses_gin": GIN_INDEX in hyb,
        "hybrid_uses_chunk_terms_pkey": "chunk_terms_pkey" in hyb,  # the BM25 leg's index
        "vector_plan_indexes": sorted(vec),
        "hybrid_plan_indexes": sorted(hyb),
    }


async def storage_sizes(app: Archivist) -> dict[str, str]:
    sql = "SELECT pg_size_pretty(pg_relation_size($1::regclass))"
    return {
        "chunks_table_total": await app.db.pool.fetchval(
            "SELECT pg_size_pretty(pg_total_relation_size('chunks'::regclass))"
        ),
        "hnsw_index": await app.db.pool.fetchval(sql, HNSW_INDEX),
        "gin_index": await app.db.pool.fetchval(sql, GIN_INDEX),
    }


async def query_plans(app: Archivist, query: str, vector: np.ndarray, source_id: uuid.UUID | None) -> dict[str, str]:
    """EXPLAIN ANALYZE of the vector and hybrid SQL (one query), as text."""
    hybrid = HybridSearch(app.db, app.settings)
    s = app.settings
    keywords = await hybrid.keyword_query(query)
    plans = {}
    async with app.db.pool.acquire() as conn:
        for label, sql, params in (
            ("vector", VECTOR_SQL, (vector, source_id, 10)),
            ("hybrid", hybrid._sql(), (vector, source_id, s.hybrid_candidates, keywords, 1.0, 1.0, float(s.rrf_k), 10)),
        ):
            rows = await conn.fetch("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) " + sql, *params)
            plans[label] = "\n".join(r[0] for r in rows)
    return plans


ANN_SQL = """
SELECT id, embedding <=> $1 AS dist FROM chunks WHERE ($2::uuid IS NULL OR source_id = $2)
ORDER BY embedding <=> $1 LIMIT $3
"""
# Different text on purpose: a prepared statement keeps the plan it was made with, and this one is
# planned with index scans off.
EXACT_SQL = "/* exact */" + ANN_SQL


def recall_scores(found: list[Any], exact: list[Any]) -> tuple[float, float, float]:
    """recall@k by id, and ann-benchmarks' distance recall: the share of returned rows no farther than
    the exact k-th neighbour times (1 + eps), for eps 1e-3 and 1e-2. The synthetic corpus holds ~190
    noisy copies of each passage, so many true neighbours are near ties and id recall understates."""
    truth = {r["id"] for r in exact}
    kth = max(r["dist"] for r in exact)
    by_id = len({r["id"] for r in found} & truth) / max(len(truth), 1)
    within = [sum(r["dist"] <= kth * (1 + eps) for r in found) / max(len(exact), 1) for eps in (1e-3, 1e-2)]
    return by_id, within[0], within[1]


async def vector_recall(
    app: Archivist, vectors: list[np.ndarray], source_id: uuid.UUID | None, ef_values: Sequence[int]
) -> dict[str, Any]:
    """recall@10 of the HNSW vector leg against exact search (index scans off), and its latency, per ef_search."""
    exact: list[list[Any]] = []
    async with app.db.pool.acquire() as conn:
        for vec in vectors:
            async with conn.transaction():
                await conn.execute("SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off")
                exact.append(await conn.fetch(EXACT_SQL, vec, source_id, 10))
        out: dict[str, Any] = {"queries": len(vectors)}
        for ef in ef_values:
            scores, times = [], []
            async with conn.transaction():
                await conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef)}")
                for vec, truth in zip(vectors, exact, strict=True):
                    start = time.perf_counter()
                    found = await conn.fetch(ANN_SQL, vec, source_id, 10)
                    times.append((time.perf_counter() - start) * 1000)
                    scores.append(recall_scores(found, truth))
            by_id, eps3, eps2 = (round(float(np.mean([s[i] for s in scores])), 4) for i in range(3))
            out[f"ef{ef}"] = {
                "recall_at_10": by_id,
                "distance_recall_eps1e-3": eps3,
                "distance_recall_eps1e-2": eps2,
                "p50_ms": round(percentile(times, 50), 1),
                "p95_ms": round(percentile(times, 95), 1),
            }
    return out


async def keyword_matches(app: Archivist, queries: Sequence[str]) -> dict[str, float]:
    """How many chunks the keyword leg must rank (every chunk matching any informative query term)."""
    hybrid = HybridSearch(app.db, app.settings)
    sql = "SELECT count(*) FROM chunks WHERE tsv @@ $1::tsquery"
    counts = [await app.db.pool.fetchval(sql, await hybrid.keyword_query(q)) for q in queries]
    total = await chunk_count(app)
    return {
        "matches_p50": percentile(counts, 50),
        "matches_p95": percentile(counts, 95),
        "share_p50": round(percentile(counts, 50) / max(total, 1), 3),
    }


async def time_strategy(
    strategy: SearchStrategy, queries: list[str], vectors: list[np.ndarray], embed_ms: list[float], source_id: Any
) -> dict[str, float]:
    """p50/p95 of embedding + search (ms) per query, one at a time after a warm-up pass of 3 queries."""
    for text, vec in list(zip(queries, vectors, strict=True))[:3]:
        await strategy.search(SearchRequest(text, vec, 10, source_id))
    total, search = [], []
    for text, vec, emb in zip(queries, vectors, embed_ms, strict=True):
        start = time.perf_counter()
        await strategy.search(SearchRequest(text, vec, 10, source_id))
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
        result["indexes"] = await check_indexes(app, queries[0], qvecs[0], None)
        result["indexes_with_source_filter"] = await check_indexes(app, queries[0], qvecs[0], source_id)
        result["keyword_leg"] = await keyword_matches(app, queries[:50])
        if args.recall_queries:
            sample = qvecs[: args.recall_queries]
            result["vector_recall"] = await vector_recall(app, sample, None, args.ef_search)
            if args.with_source_filter:
                result["vector_recall_source"] = await vector_recall(app, sample, source_id, args.ef_search)
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
    parser.add_argument("--maintenance-work-mem", default="1GB")
    parser.add_argument("--parallel-workers", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    args.ef_search = [int(v) for v in str(args.ef_search).split(",") if v.strip()]
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
    results = [await measure_size(settings, embedder, size, pairs, vectors, queries, args) for size in args.sizes]
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
    report = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str))
    print(f"\n{report['date']}  {report['machine']['cpu']} ({report['machine']['cores']} cores)")
    for size in report["sizes"]:
        print(f"\n{size['chunks']} chunks  (query embedding p50 {size['query_embed_p50_ms']} ms)")
        if size.get("build"):
            print(f"  build: {size['build']}")
        print(f"  storage: {size['storage']}  sources: {size['sources']}")
        print(f"  indexes: {size['indexes']}")
        for key in ("vector_recall", "vector_recall_source"):
            if key in size:
                print(f"  {key}: {size[key]}")
        print(f"  keyword leg: {size['keyword_leg']}")
        for name, r in size.items():
            if isinstance(r, dict) and "p50_ms" in r:
                print(
                    f"  {name:<16} p50 {r['p50_ms']:>7.1f} ms  p95 {r['p95_ms']:>7.1f} ms   "
                    f"(search only p50 {r['search_only_p50_ms']:.1f} / p95 {r['search_only_p95_ms']:.1f})"
                )
    print(f"\ngrowth: {report['growth_search_only_p50']}")


if __name__ == "__main__":
    main()
