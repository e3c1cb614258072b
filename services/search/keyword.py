"""Keyword-only retrieval (`search_type="keyword"`): the hybrid query's keyword leg alone (BM25 over
compact postings (sql/042) by default, ts_rank with `keyword_ranking = "ts_rank"`), no vector leg.

score = the chunk's keyword score / the best one's (the top result is 1.0); `similarity` is still
the query-chunk cosine, so `similarity_threshold` means what it means for every search type.

`hybrid_mode="filter"` (`FilterSearch`): the keyword leg's matches (`keyword_mode` "any" or "all"),
in the vector leg's order: score = cosine similarity; chunks without a vector yet come last, in
keyword order.
"""

from __future__ import annotations

from models import SearchHit
from services.search.base import HIT_COLUMNS, SearchRequest, SearchStrategy, to_hit
from services.search.hybrid import HybridSearch
from services.search.legs import code_filter, keyword_leg

# The parameters are the hybrid query's ($1-$14, see services/search/hybrid.py), so the keyword leg
# is shared as written; $5-$7 (fusion weights and k) are only typed here, in an unused CTE.
KEYWORD_SQL = """
WITH unused AS (SELECT $5::float8, $6::float8, $7::float8),
{keyword_leg}
SELECT {hit_columns}, kw.kscore
FROM kw JOIN chunks c ON c.id = kw.id JOIN documents d ON d.id = c.document_id
ORDER BY {order} LIMIT $8
"""
KEYWORD_ORDER = "kw.rnk"
VECTOR_ORDER = "c.embedding <=> $1 NULLS LAST, kw.rnk"


class KeywordSearch(SearchStrategy):
    name = "keyword"
    order = KEYWORD_ORDER

    def __init__(self, hybrid: HybridSearch) -> None:
        self.hybrid = hybrid  # its term statistics and keyword arguments
        self.db = hybrid.db
        self.settings = hybrid.settings

    def _sql(self, mode: str = "any", code_only: bool = False) -> str:
        leg = keyword_leg(self.settings, mode)
        sql = KEYWORD_SQL.format(keyword_leg=leg, hit_columns=HIT_COLUMNS, order=self.order)
        return code_filter(sql, code_only)

    async def rows(self, request: SearchRequest) -> list:
        depth = max(self.settings.hybrid_candidates, request.limit)
        mode = request.keyword_mode
        (keyword, *bm25), _ = await self.hybrid.keyword_args(request.query, depth, mode=mode, terms=request.query_terms)
        if not keyword:
            return []
        return await self.db.pool.fetch(
            self._sql(mode, request.code_only),
            request.query_vector,
            request.source_ids,
            depth,
            keyword,
            0.0,
            1.0,
            0.0,
            request.limit,
            *bm25,
        )

    async def search(self, request: SearchRequest) -> list[SearchHit]:
        rows = await self.rows(request)
        top = max((float(r["kscore"]) for r in rows), default=0.0) or 1.0
        return [to_hit(_fields(r), float(r["kscore"]) / top, self.name) for r in rows]


class FilterSearch(KeywordSearch):
    """hybrid_mode="filter": keyword matches in vector order; score = cosine similarity."""

    name = "hybrid"
    order = VECTOR_ORDER

    async def search(self, request: SearchRequest) -> list[SearchHit]:
        rows = await self.rows(request)
        return [to_hit(_fields(r), float(r["similarity"]), "hybrid" if r["similarity"] else "keyword") for r in rows]


def _fields(row) -> dict:
    return {k: v for k, v in dict(row).items() if k != "kscore"}
