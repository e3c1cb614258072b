"""Hybrid retrieval: reciprocal-rank fusion of HNSW vector top-N and full-text top-N, in one SQL query.

The keyword leg ORs the query's terms (an AND of every term matches almost nothing for natural
questions) through `websearch_to_tsquery`, and ranks with `ts_rank(..., 1)`: the length
normalisation is what makes it competitive with BM25 for fusion.
"""

from __future__ import annotations

import re

from models import SearchHit
from services.database import Database
from services.search.base import HIT_COLUMNS, SearchRequest, SearchStrategy, to_hit
from services.settings import Settings

# $1 query vector, $2 source filter, $3 depth per leg, $4 tsquery text, $5 vector weight,
# $6 keyword weight, $7 rrf k, $8 final limit
HYBRID_SQL = """
WITH q AS (SELECT websearch_to_tsquery('{fts_config}'::regconfig, $4) AS tsq),
vec AS (
    SELECT id, row_number() OVER (ORDER BY dist, id) AS rnk FROM (
        SELECT id, embedding <=> $1 AS dist FROM chunks
        WHERE ($2::uuid IS NULL OR source_id = $2)
        ORDER BY embedding <=> $1 LIMIT $3
    ) v
),
kw AS (
    SELECT id, row_number() OVER (ORDER BY rank DESC, id) AS rnk FROM (
        SELECT c.id, ts_rank(c.tsv, q.tsq, 1) AS rank FROM chunks c, q
        WHERE c.tsv @@ q.tsq AND ($2::uuid IS NULL OR c.source_id = $2)
        ORDER BY rank DESC LIMIT $3
    ) k
),
fused AS (
    SELECT coalesce(vec.id, kw.id) AS id, vec.rnk AS vrank, kw.rnk AS krank,
           coalesce($5::float8 / ($7::float8 + vec.rnk), 0) + coalesce($6::float8 / ($7::float8 + kw.rnk), 0) AS rrf
    FROM vec FULL OUTER JOIN kw ON vec.id = kw.id
    ORDER BY rrf DESC, id LIMIT $8
)
SELECT {hit_columns}, fused.rrf, fused.vrank, fused.krank
FROM fused JOIN chunks c ON c.id = fused.id JOIN documents d ON d.id = c.document_id
ORDER BY fused.rrf DESC, c.id
"""

OPERATOR_WORDS = {"or", "and", "not"}


def keyword_query(text: str) -> str:
    """The query's words joined with OR, in websearch_to_tsquery syntax."""
    words = [w for w in re.findall(r"\w+", text.lower()) if w not in OPERATOR_WORDS]
    return " or ".join(words)


def match_type(vrank: int | None, krank: int | None) -> str:
    if vrank is not None and krank is not None:
        return "hybrid"
    return "vector" if vrank is not None else "keyword"


class HybridSearch(SearchStrategy):
    """score = fused RRF score divided by its maximum (ranked first by both legs = 1.0)."""

    name = "hybrid"

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings

    def _sql(self) -> str:
        return HYBRID_SQL.format(fts_config=self.db.fts_config, hit_columns=HIT_COLUMNS)

    async def fused_rows(self, request: SearchRequest, limit: int) -> list:
        s = self.settings
        depth = max(s.hybrid_candidates, limit)
        return await self.db.pool.fetch(
            self._sql(),
            request.query_vector,
            request.source_id,
            depth,
            keyword_query(request.query),
            float(s.hybrid_vector_weight),
            float(s.hybrid_keyword_weight),
            float(s.rrf_k),
            limit,
        )

    def max_rrf(self) -> float:
        s = self.settings
        return (s.hybrid_vector_weight + s.hybrid_keyword_weight) / (s.rrf_k + 1)

    async def search(self, request: SearchRequest) -> list[SearchHit]:
        rows = await self.fused_rows(request, request.limit)
        top = self.max_rrf()
        return [to_hit(_hit_fields(r), r["rrf"] / top, match_type(r["vrank"], r["krank"])) for r in rows]


def _hit_fields(row) -> dict:
    return {k: v for k, v in dict(row).items() if k not in ("rrf", "vrank", "krank")}
