"""bench/scale.py's look at the keyword leg: the postings it reads, and the impact-ordered leg
(services/search/bm25.py, sql/012) against exhaustive BM25 on the same corpus."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.metrics import percentile
from services.app import Archivist
from services.search.bm25 import BM25_LEG, BM25_TOPK_LEG, query_terms
from services.search.hybrid import HybridSearch
from services.search.legs import code_filter


async def keyword_matches(app: Archivist, queries: Sequence[str]) -> dict[str, Any]:
    """What the keyword leg works on: the kept query terms and their postings (all of them for the
    exhaustive leg, at most bm25_postings_per_term each over impact order)."""
    s = app.settings
    if s.keyword_ranking != "bm25":
        hybrid = HybridSearch(app.db, s)
        sql = "SELECT count(*) FROM chunks WHERE tsv @@ $1::tsquery"
        counts = [await app.db.pool.fetchval(sql, await hybrid.keyword_query(q)) for q in queries]
        return {"matches_p50": percentile(counts, 50), "matches_p95": percentile(counts, 95)}
    terms, postings, stats_ms = [], [], []
    hybrid = HybridSearch(app.db, s)
    for q in queries:
        start = time.perf_counter()
        kept = await query_terms(app.db, q, s.keyword_max_term_frequency, await hybrid.term_stats.frequencies())
        stats_ms.append((time.perf_counter() - start) * 1000)
        dfs = [await app.db.pool.fetchval("SELECT bm25_df($1)", t) for t in kept.terms]
        terms.append(len(kept.terms))
        postings.append(sum(dfs))
    cap = s.bm25_postings_per_term
    read = [min(p, cap * t) for p, t in zip(postings, terms, strict=True)] if cap else postings
    return {
        "kept_terms_p50": percentile(terms, 50),
        "postings_of_kept_terms_p50": percentile(postings, 50),
        "postings_of_kept_terms_p95": percentile(postings, 95),
        "postings_read_p50": percentile(read, 50),
        "term_statistics_ms_p50": round(percentile(stats_ms, 50), 1),
        "term_statistics_ms_p95": round(percentile(stats_ms, 95), 1),
    }


# The keyword leg alone; the hybrid parameters it does not use are typed and passed as NULL.
KEYWORD_ONLY_SQL = """WITH {leg}
SELECT id, kscore FROM kw
WHERE $1::text IS NULL AND $5::float8 IS NULL AND $6::float8 IS NULL AND $7::float8 IS NULL AND $8::int IS NULL
ORDER BY rnk"""


async def keyword_agreement(app: Archivist, queries: Sequence[str], source_id: Any) -> dict[str, Any]:
    """The impact-ordered keyword leg against exhaustive BM25 (its top hybrid_candidates), per query:
    share of the exhaustive top-N ids found, and of its scores (the corpus holds ~190 copies of each
    passage, identical texts tie, and ties may be broken by different ids), with both legs' SQL time."""
    s = app.settings
    depth, cand, per_term = s.hybrid_candidates, max(s.bm25_candidates, s.hybrid_candidates), s.bm25_postings_per_term
    ids, scores, t_exact, t_topk = [], [], [], []
    estimates = await HybridSearch(app.db, s).term_stats.frequencies()
    async with app.db.pool.acquire() as conn:
        for q in queries:
            kept = await query_terms(app.db, q, s.keyword_max_term_frequency, estimates)
            if not kept.terms:
                continue
            args = (None, source_id and [source_id], depth, kept.terms, None, None, None, None, kept.idfs)
            args += (float(s.bm25_k1), float(s.bm25_b), kept.avgdl)
            start = time.perf_counter()
            exact = await conn.fetch(code_filter(KEYWORD_ONLY_SQL.format(leg=BM25_LEG), False), *args)
            t_exact.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            topk_sql = code_filter(KEYWORD_ONLY_SQL.format(leg=BM25_TOPK_LEG), False)
            approx = await conn.fetch(topk_sql, *args, per_term or 1000, cand)
            t_topk.append((time.perf_counter() - start) * 1000)
            if not exact:  # no chunk has any kept term (here, in this source)
                continue
            truth = {r["id"] for r in exact}
            ids.append(len(truth & {r["id"] for r in approx}) / max(len(truth), 1))
            want = sorted((r["kscore"] for r in exact), reverse=True)
            got = sorted((r["kscore"] for r in approx), reverse=True)[: len(want)]
            same = sum(1 for w, g in zip(want, got, strict=False) if abs(w - g) <= 1e-6 * max(abs(w), 1.0))
            scores.append(same / max(len(want), 1))
    return {
        "queries": len(ids),
        "postings_per_term": per_term,
        "candidates": cand,
        "id_recall_mean": round(float(np.mean(ids)), 4) if ids else None,
        "score_recall_mean": round(float(np.mean(scores)), 4) if scores else None,
        "score_recall_min": round(float(np.min(scores)), 4) if scores else None,
        "exhaustive_sql_p50_ms": round(percentile(t_exact, 50), 1) if t_exact else None,
        "exhaustive_sql_p95_ms": round(percentile(t_exact, 95), 1) if t_exact else None,
        "impact_sql_p50_ms": round(percentile(t_topk, 50), 1) if t_topk else None,
        "impact_sql_p95_ms": round(percentile(t_topk, 95), 1) if t_topk else None,
    }
