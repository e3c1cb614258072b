"""Keyword-only retrieval (`search_type="keyword"`): the hybrid query's keyword leg alone (BM25 over
`chunk_terms` by default, ts_rank with `keyword_ranking = "ts_rank"`), no vector leg.

score = the chunk's keyword score / the best one's (the top result is 1.0); `similarity` is still
the query-chunk cosine, so `similarity_threshold` means what it means for every search type.
"""

from __future__ import annotations

from models import SearchHit
from services.search.base import HIT_COLUMNS, SearchRequest, SearchStrategy, to_hit
from services.search.bm25 import BM25_LEG, BM25_TOPK_LEG
from services.search.hybrid import TS_RANK_LEG, HybridSearch

# The parameters are the hybrid query's ($1-$14, see services/search/hybrid.py), so the keyword leg
# is shared as written; $5-$7 (fusion weights and k) are only typed here, in an unused CTE.
KEYWORD_SQL = """
WITH unused AS (SELECT $5::float8, $6::float8, $7::float8),
{keyword_leg}
SELECT {hit_columns}, kw.kscore
FROM kw JOIN chunks c ON c.id = kw.id JOIN documents d ON d.id = c.document_id
ORDER BY kw.rnk LIMIT $8
"""


class KeywordSearch(SearchStrategy):
    name = "keyword"

    def __init__(self, hybrid: HybridSearch) -> None:
        self.hybrid = hybrid  # its term statistics and keyword arguments
        self.db = hybrid.db
        self.settings = hybrid.settings

    def _sql(self) -> str:
        s = self.settings
        if s.keyword_ranking != "bm25":
            leg = TS_RANK_LEG
        else:
            leg = BM25_TOPK_LEG if s.bm25_postings_per_term else BM25_LEG
        return KEYWORD_SQL.format(keyword_leg=leg, hit_columns=HIT_COLUMNS)

    async def search(self, request: SearchRequest) -> list[SearchHit]:
        depth = max(self.settings.hybrid_candidates, request.limit)
        (keyword, *bm25), _ = await self.hybrid.keyword_args(request.query, depth)
        if not keyword:
            return []
        rows = await self.db.pool.fetch(
            self._sql(),
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
        top = max((float(r["kscore"]) for r in rows), default=0.0) or 1.0
        return [to_hit(_fields(r), float(r["kscore"]) / top, self.name) for r in rows]


def _fields(row) -> dict:
    return {k: v for k, v in dict(row).items() if k != "kscore"}
