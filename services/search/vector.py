"""Dense retrieval: pgvector HNSW, cosine distance."""

from __future__ import annotations

from models import SearchHit
from services.database import Database
from services.search.base import HIT_COLUMNS, SearchRequest, SearchStrategy, to_hit

VECTOR_SQL = f"""
WITH top AS (
    SELECT id, embedding <=> $1 AS dist FROM chunks
    WHERE ($2::uuid[] IS NULL OR source_id = ANY($2::uuid[]))
    ORDER BY embedding <=> $1 LIMIT $3
)
SELECT {HIT_COLUMNS}
FROM top JOIN chunks c ON c.id = top.id JOIN documents d ON d.id = c.document_id
ORDER BY top.dist, c.id
"""


class VectorSearch(SearchStrategy):
    """score = cosine similarity between the query and the chunk."""

    name = "vector"

    def __init__(self, db: Database) -> None:
        self.db = db

    async def search(self, request: SearchRequest) -> list[SearchHit]:
        rows = await self.db.pool.fetch(VECTOR_SQL, request.query_vector, request.source_ids, request.limit)
        return [to_hit(r, r["similarity"], self.name) for r in rows]
