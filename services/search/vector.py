"""Dense retrieval: pgvector HNSW over halfvec, cosine distance, as wide as the collection needs
(services/search/breadth.py), or an exact scan of a small filtered set. Chunks not embedded yet are not
seen (the search reply says how many: `pending_embeddings`)."""

from __future__ import annotations

from models import SearchHit
from services.core.database import Database
from services.search.base import HIT_COLUMNS, SearchRequest, SearchStrategy, to_hit
from services.search.breadth import SearchBreadth
from services.search.legs import code_filter

# The vector leg's nearest chunks, two ways: $1 the query vector, $2 the sources (NULL: all), $3 how
# many. `{vec_filter}` is a condition ANDed first; `{{code:chunks.id}}` the code documents' mark
# (services/search/legs.py).
#: By the HNSW graph, as wide as services/search/breadth.py sets: approximate.
HNSW_NEAREST = """SELECT id, embedding <=> $1 AS dist FROM chunks
        WHERE {vec_filter}($2::uuid[] IS NULL OR source_id = ANY($2::uuid[])){{code:chunks.id}}
        ORDER BY embedding <=> $1 LIMIT $3"""
#: By every chunk of the sources ($2 never NULL), exact, for a small filtered set
#: (`SearchRequest.exact_vectors`): the distances come out of a subquery fenced with OFFSET 0, whose
#: rows no index can order, so the graph is never walked; the chunks are read through
#: chunks_source_idx and sorted.
EXACT_NEAREST = """SELECT id, dist FROM (
            SELECT id, embedding <=> $1 AS dist FROM chunks
            WHERE {vec_filter}source_id = ANY($2::uuid[]){{code:chunks.id}} OFFSET 0
        ) scope ORDER BY dist, id LIMIT $3"""

_VECTOR_TEMPLATE = """
WITH top AS (
    {nearest}
)
SELECT {hit_columns}
FROM top JOIN chunks c ON c.id = top.id JOIN documents d ON d.id = c.document_id
ORDER BY top.dist, c.id
"""
#: When some chunks in scope have no vector yet: an exact scan must not rank them (NULL distances).
PENDING_FILTER = "embedding IS NOT NULL AND "


def vector_sql(exact: bool = False, pending: bool = False) -> str:
    """The vector search's query: exactly over the searched sources or by the graph, leaving out
    chunks without a vector when `pending`."""
    nearest = (EXACT_NEAREST if exact else HNSW_NEAREST).format(vec_filter=PENDING_FILTER if pending else "")
    return code_filter(_VECTOR_TEMPLATE.format(nearest=nearest, hit_columns=HIT_COLUMNS), False)


VECTOR_SQL = vector_sql()
VECTOR_PENDING_SQL = vector_sql(pending=True)


class VectorSearch(SearchStrategy):
    """score = cosine similarity between the query and the chunk."""

    name = "vector"

    def __init__(self, db: Database) -> None:
        self.db = db

    async def search(self, request: SearchRequest) -> list[SearchHit]:
        sql = vector_sql(request.exact_vectors, request.pending_embeddings > 0)
        breadth = SearchBreadth.of(self.db)
        args = (request.query_vector, request.source_ids, request.limit)
        rows = await breadth.fetch(sql, *args, filtered=request.filtered)
        return [to_hit(r, r["similarity"], self.name) for r in rows]
