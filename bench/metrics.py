"""Retrieval metrics computed the way trec_eval / pytrec_eval compute them (BEIR's evaluator).

* nDCG@k (trec_eval ``ndcg_cut.k``): gain = the graded relevance (not 2^rel - 1), discount
  1/log2(rank + 1), ideal DCG from the query's judged relevances sorted descending, cut at k.
  Only judgments with relevance > 0 count; a query with no relevant documents scores 0.
* recall@k (``recall.k``): relevant documents retrieved in the top k / all relevant documents.
* MRR@k (BEIR's ``mrr_cut``): 1 / rank of the first relevant document within the top k, else 0.

A run is a list of document ids, best first (duplicates after the first occurrence are ignored,
as a document appears once in a trec run). Ties are the caller's business: the order given is
the ranking. Scores averaged over queries are plain means over the queries evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Sequence[str]]


def dedupe(ranking: Sequence[str]) -> list[str]:
    """Document ids in first-occurrence order."""
    return list(dict.fromkeys(ranking))


def dcg(gains: Sequence[float]) -> float:
    """Discounted cumulative gain of gains listed by rank (rank 1 first)."""
    return sum(g / math.log2(rank + 2) for rank, g in enumerate(gains))


def ndcg_at_k(ranking: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    """nDCG@k of one ranked list against one query's judgments."""
    ideal = sorted((r for r in judged.values() if r > 0), reverse=True)[:k]
    if not ideal:
        return 0.0
    gains = [max(judged.get(doc, 0), 0) for doc in dedupe(ranking)[:k]]
    return dcg(gains) / dcg(ideal)


def recall_at_k(ranking: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    """Share of the query's relevant documents found in the top k."""
    relevant = {doc for doc, r in judged.items() if r > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(dedupe(ranking)[:k])) / len(relevant)


def mrr_at_k(ranking: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    """Reciprocal rank of the first relevant document in the top k (0 if none)."""
    for rank, doc in enumerate(dedupe(ranking)[:k], start=1):
        if judged.get(doc, 0) > 0:
            return 1.0 / rank
    return 0.0


def evaluate(run: Run, qrels: Qrels) -> dict[str, float]:
    """Mean nDCG@10, recall@100 and MRR@10 over the queries of `run` that have judgments."""
    queries = [q for q in run if q in qrels]
    if not queries:
        return {"ndcg@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0, "queries": 0}
    n = len(queries)
    return {
        "ndcg@10": sum(ndcg_at_k(run[q], qrels[q], 10) for q in queries) / n,
        "recall@100": sum(recall_at_k(run[q], qrels[q], 100) for q in queries) / n,
        "mrr@10": sum(mrr_at_k(run[q], qrels[q], 10) for q in queries) / n,
        "queries": n,
    }


def percentile(values: Sequence[float], pct: float) -> float:
    """Linear-interpolated percentile (numpy's default method) of a non-empty sequence."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * pct / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def first_ranks(rankings: list[list[str]], targets: list[list[str]]) -> list[int | None]:
    """1-based rank of each question's first target page in its top 10 (None: not there)."""
    out = []
    for ranking, wanted in zip(rankings, targets, strict=True):
        ranks = [i + 1 for i, path in enumerate(ranking[:10]) if path in wanted]
        out.append(ranks[0] if ranks else None)
    return out


def hit_scores(rankings: list[list[str]], targets: list[list[str]]) -> dict[str, float]:
    """hit@1, hit@5 and MRR@10 of each question's first target page in its top 10."""
    hit1 = hit5 = rr = 0.0
    for ranking, wanted in zip(rankings, targets, strict=True):
        ranks = [i for i, path in enumerate(ranking[:10]) if path in wanted]
        first = ranks[0] if ranks else None
        hit1 += first == 0
        hit5 += first is not None and first < 5
        rr += 1 / (first + 1) if first is not None else 0.0
    n = max(1, len(rankings))
    return {"hit@1": round(hit1 / n, 3), "hit@5": round(hit5 / n, 3), "mrr@10": round(rr / n, 3)}
