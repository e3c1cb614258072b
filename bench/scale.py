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


async def create_documents(app: Archivist, source_id: uuid.UUID, count: int, pairs: Sequence) -> list[uuid.UUID]:
    ids = [uuid.uuid4() for _ in range(count)]
    records = [
        (doc_id, source_id, pairs[i % len(pairs)][0][:500], f"scale:{i}", "text", "", f"h{i}", CHUNKS_PER_DOCUMENT)
        for i, doc_id in enumerate(ids)
    ]
    async with app.db.pool.acquire() as conn:
        await conn.copy_records_to_table(
            "documents",
            records=records,
            columns=["id", "source_id", "title", "url", "document_type", "content", "content_hash", "chunk_count"],
        )
    return ids


async def load_chunks(app: Archivist, size: int, pairs: Sequence, vectors: np.ndarray, seed: int) -> None:
    """COPY `size` chunks (HNSW dropped during the load, rebuilt after)."""
    rng = np.random.default_rng(seed)
    source = await app.sources.create(f"scale-{size}", description="bench/scale.py synthetic corpus")
    doc_ids = await create_documents(app, source.id, -(-size // CHUNKS_PER_DOCUMENT), pairs)
    async with app.db.pool.acquire() as conn:
        index_def = await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = $1", HNSW_INDEX)
        await conn.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")
        start = time.perf_counter()
        for offset in range(0, size, COPY_BATCH):
            n = min(COPY_BATCH, size - offset)
            picks = (np.arange(offset, offset + n)) % len(pairs)
            noisy = perturb(vectors[picks], rng)
            records = [
                (
                    doc_ids[(offset + j) // CHUNKS_PER_DOCUMENT],
                    source.id,
                    (offset + j) % CHUNKS_PER_DOCUMENT,
                    pairs[p][1],
                    0,
                    len(pairs[p][1]),
                    [],
                    pairs[p][0],
                    noisy[j],
                )
                for j, p in enumerate(picks.tolist())
            ]
            await conn.copy_records_to_table("chunks", records=records, columns=CHUNK_COLUMNS)
            logger.info("copied %d/%d chunks (%.0fs)", offset + n, size, time.perf_counter() - start)
        await conn.execute("SET maintenance_work_mem = '1GB'")
        await conn.execute("SET max_parallel_maintenance_workers = 1")
        build = time.perf_counter()
        await conn.execute(index_def)
        logger.info("HNSW index built in %.0fs", time.perf_counter() - build)
        await conn.execute("ANALYZE chunks")
        await conn.execute("ANALYZE documents")


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
    sized = settings.model_copy(
        update={"database_url": None, "data_dir": args.cache_dir / f"scale-{slug(embedder.name)}-{size}"}
    )
    app = await Archivist.open(sized, embedder)
    try:
        have = await chunk_count(app)
        if have != size:
            if have:
                raise SystemExit(f"{sized.data_dir} holds {have} chunks, not {size}: delete it to rebuild")
            await load_chunks(app, size, pairs, vectors, seed=size)
        qvecs, embed_ms = [], []
        for q in queries:
            start = time.perf_counter()
            qvecs.append(embedder.embed_query(q))
            embed_ms.append((time.perf_counter() - start) * 1000)
        source_id = await app.db.pool.fetchval("SELECT id FROM sources ORDER BY created_at LIMIT 1")
        result: dict[str, Any] = {"chunks": size, "query_embed_p50_ms": round(percentile(embed_ms, 50), 1)}
        result["indexes"] = await check_indexes(app, queries[0], qvecs[0], None)
        result["indexes_with_source_filter"] = await check_indexes(app, queries[0], qvecs[0], source_id)
        result["keyword_leg"] = await keyword_matches(app, queries[:50])
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
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
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
        print(f"  indexes: {size['indexes']}")
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
