"""Dense retrieval: pgvector HNSW over halfvec, cosine distance, as wide as the collection needs
(services/search/breadth.py). Chunks not embedded yet are not seen (the search
reply says how many: `pending_embeddings`)."""

from __future__ import annotations

from models import SearchHit
from services.core.database import Database
from services.search.base import HIT_COLUMNS, SearchRequest, SearchStrategy, to_hit
from services.search.breadth import SearchBreadth

_VECTOR_TEMPLATE = """
WITH top AS (
    SELECT id, embedding <=> $1 AS dist FROM chunks
    WHERE {vec_filter}($2::uuid[] IS NULL OR source_id = ANY($2::uuid[]))
    ORDER BY embedding <=> $1 LIMIT $3
)
SELECT {hit_columns}
FROM top JOIN chunks c ON c.id = top.id JOIN documents d ON d.id = c.document_id
ORDER BY top.dist, c.id
"""
VECTOR_SQL = _VECTOR_TEMPLATE.format(vec_filter="", hit_columns=HIT_COLUMNS)
#: When some chunks in scope have no vector yet: an exact scan must not rank them (NULL distances).
VECTOR_PENDING_SQL = _VECTOR_TEMPLATE.format(vec_filter="embedding IS NOT NULL AND ", hit_columns=HIT_COLUMNS)


class VectorSearch(SearchStrategy):
    """score = cosine similarity between the query and the chunk."""

    name = "vector"

    def __init__(self, db: Database) -> None:
        self.db = db

    async def search(self, request: SearchRequest) -> list[SearchHit]:
        sql = VECTOR_PENDING_SQL if request.pending_embeddings else VECTOR_SQL
        breadth = SearchBreadth.of(self.db)
        args = (request.query_vector, request.source_ids, request.limit)
        rows = await breadth.fetch(sql, *args, filtered=request.filtered)
        return [to_hit(r, r["similarity"], self.name) for r in rows]
