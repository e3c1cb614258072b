"""Two-stage retrieval: hybrid candidates re-scored by a cross-encoder, fused with the first-stage rank.

The top `rerank_candidates` hybrid rows go through the cross-encoder (title + chunk text, cut to
`rerank_max_length` tokens); rows beyond that depth keep their hybrid order after the reranked
ones, so a request for more results than the rerank depth still gets them without paying for
more cross-encoder passes.

How the cross-encoder's verdict is combined with the first stage (`rerank_fusion`):

* ``"replace"`` - order by the cross-encoder logit alone; score = sigmoid(logit).
* ``"rrf"`` - weighted reciprocal-rank fusion of the cross-encoder rank and the hybrid rank:
  ``w / (k + ce_rank) + (1 - w) / (k + hybrid_rank)`` with ``w = rerank_weight`` and
  ``k = rerank_rrf_k``; score = fused / its maximum (first in both orders = 1.0).
* ``"linear"`` - convex mix of min-max normalised scores over the candidates:
  ``w * ce_norm + (1 - w) * hybrid_norm``.

Fusion keeps the first stage's evidence (exact keyword matches, dense similarity) that a small
cross-encoder trained on web questions (MS MARCO) misjudges on specialised text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from models import SearchHit
from services.core.settings import Settings
from services.embeddings.gate import QUERY, model_gate
from services.reranking.base import Reranker
from services.search.base import SearchRequest, SearchStrategy, to_hit
from services.search.hybrid import HybridSearch, _hit_fields


def sigmoid(x: float) -> float:
    """Logistic function, safe for large magnitudes."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def passage_text(title: str, text: str) -> str:
    """What the cross-encoder reads for a chunk: its document title, then the chunk text."""
    return f"{title}\n{text}"


def ranks_by(values: Sequence[float]) -> list[int]:
    """1-based rank of each value when sorted descending (ties keep input order)."""
    order = sorted(range(len(values)), key=lambda i: -values[i])
    ranks = [0] * len(values)
    for rank, index in enumerate(order, start=1):
        ranks[index] = rank
    return ranks


def min_max(values: Sequence[float]) -> list[float]:
    """Values scaled to 0-1 over the list (all 1.0 when they are equal)."""
    low, high = min(values), max(values)
    if high - low < 1e-12:
        return [1.0] * len(values)
    return [(v - low) / (high - low) for v in values]


def rrf_scores(logits: Sequence[float], weight: float, k: float) -> list[float]:
    """Weighted RRF of cross-encoder rank and first-stage rank (candidates arrive in first-stage order),
    divided by its maximum possible value so the best candidate can reach 1.0."""
    ce_ranks = ranks_by(logits)
    top = weight / (k + 1) + (1 - weight) / (k + 1)
    return [(weight / (k + ce) + (1 - weight) / (k + first)) / top for first, ce in enumerate(ce_ranks, start=1)]


def linear_scores(logits: Sequence[float], first_stage: Sequence[float], weight: float) -> list[float]:
    """Convex mix of min-max normalised cross-encoder logits and first-stage scores."""
    ce = min_max(logits)
    fs = min_max(first_stage)
    return [weight * c + (1 - weight) * f for c, f in zip(ce, fs, strict=True)]


def fuse(logits: Sequence[float], first_stage: Sequence[float], settings: Settings) -> list[float]:
    """One 0-1 score per candidate (higher = better) according to `settings.rerank_fusion`."""
    mode = settings.rerank_fusion
    weight = min(max(float(settings.rerank_weight), 0.0), 1.0)
    if mode == "rrf":
        return rrf_scores(logits, weight, float(settings.rerank_rrf_k))
    if mode == "linear":
        return linear_scores(logits, first_stage, weight)
    return [sigmoid(x) for x in logits]


class RerankSearch(SearchStrategy):
    """score = the fused relevance (see module docstring); rows past the rerank depth score below
    every reranked row, in their hybrid order."""

    name = "rerank"

    def __init__(self, hybrid: HybridSearch, reranker: Reranker, settings: Settings) -> None:
        self.hybrid = hybrid
        self.reranker = reranker
        self.settings = settings

    async def search(self, request: SearchRequest) -> list[SearchHit]:
        depth = max(1, self.settings.rerank_candidates)
        rows = await self.hybrid.fused_rows(request, max(depth, request.limit))
        if not rows:
            return []
        head, tail = rows[:depth], rows[depth:]
        passages = [passage_text(r["document_title"], r["text"]) for r in head]
        logits = await model_gate().run(QUERY, self.reranker.score, request.query, passages)
        scores = fuse(logits, [float(r["rrf"]) for r in head], self.settings)
        ranked = sorted(zip(head, scores, strict=True), key=lambda pair: pair[1], reverse=True)
        hits = [to_hit(_hit_fields(r), s, self.name) for r, s in ranked]
        hits.extend(self._tail_hits(tail, head[-1]["rrf"], min(scores)))
        return hits[: request.limit]

    def _tail_hits(self, tail: Sequence, last_head_rrf: float, floor: float) -> list[SearchHit]:
        """Rows beyond the rerank depth, scored below the lowest reranked row in proportion to their RRF."""
        scale = floor / last_head_rrf if last_head_rrf > 0 else 0.0
        return [to_hit(_hit_fields(r), r["rrf"] * scale, self.name) for r in tail]
