"""Search strategy interface and the SQL they share."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import numpy as np

from models import SearchHit
from services.flags import FLAGS_COLUMN
from services.search.bm25 import QueryTerms

# Columns of a hit, given a relation `c` (chunks), `d` (documents) and the query vector as $1. A chunk
# not embedded yet (found by the keyword leg) has similarity 0.
HIT_COLUMNS = (
    "c.id AS chunk_id, c.document_id, d.title AS document_title, c.source_id, d.url, c.text, "
    "c.chunk_index, c.char_start, c.char_end, c.heading_path, coalesce(1 - (c.embedding <=> $1), 0) AS similarity, "
    "c.page_start, c.page_end, " + FLAGS_COLUMN
)

#: The query's lexemes as the BM25 postings analyse text (sql/030_identifier_terms.sql; sql/045 skips the
#: name search in a query that can hold no name), $1 the query.
QUERY_LEXEMES_SQL = "SELECT tsvector_to_array(archivist_query_tsvector('{fts_config}'::regconfig, $1))"
#: The same as `chunks.tsv` analyses it (to_tsvector alone): the ts_rank leg matches that column.
TS_QUERY_LEXEMES_SQL = "SELECT tsvector_to_array(to_tsvector('{fts_config}'::regconfig, $1))"


@dataclass
class SearchRequest:
    query: str
    query_vector: np.ndarray
    limit: int
    #: sources to search (None = all)
    source_ids: list[UUID] | None = None
    #: hybrid keyword-leg weight for this search (vector weight = 1 - it); None = the settings' weights
    keyword_weight: float | None = None
    #: chunks in scope without a vector yet (found by the keyword leg only)
    pending_embeddings: int = 0
    #: "any" (the keyword leg ORs the informative terms) or "all" (every one must match)
    keyword_mode: str = "any"
    #: search_type="code": chunks of code documents only
    code_only: bool = False
    #: the keyword leg's terms, when read beside the query's embedding (`HybridSearch.main_terms`)
    query_terms: QueryTerms | None = None
    #: the searched sources hold few chunks: the vector leg scans them all, exactly
    #: (`SearchBreadth.small_scope`); ignored without `source_ids`
    small_scope: bool = False

    @property
    def exact_vectors(self) -> bool:
        """Whether the vector leg reads every chunk of the searched sources instead of the HNSW graph."""
        return self.small_scope and self.source_ids is not None

    @property
    def filtered(self) -> bool:
        """Whether the vector leg reads part of the collection (some sources, code only): it looks
        wider (services/search/breadth.py)."""
        return self.source_ids is not None or self.code_only


def to_hit(row: Mapping[str, Any], score: float, match_type: str) -> SearchHit:
    values = dict(row)
    values["similarity"] = max(0.0, min(1.0, float(values["similarity"])))
    return SearchHit(**values, score=round(max(0.0, min(1.0, score)), 6), match_type=match_type)


class SearchStrategy(ABC):
    """Returns up to `request.limit` hits, best first, each with a 0–1 `score`."""

    name: str

    @abstractmethod
    async def search(self, request: SearchRequest) -> list[SearchHit]: ...
