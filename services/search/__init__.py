"""Search: one strategy per `search_type`, behind `SearchService`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from uuid import UUID

from models import SEARCH_TYPES, SearchHit
from services.access.scope import current_scope
from services.core.database import Database
from services.core.errors import InvalidArgument
from services.core.settings import Settings
from services.core.validation import MAX_PER_PAGE
from services.embeddings import embed_query_async
from services.embeddings.base import Embedder
from services.reranking.base import Reranker
from services.search.base import QUERY_LEXEMES_SQL, SearchRequest, SearchStrategy
from services.search.bm25 import QueryTerms
from services.search.breadth import SearchBreadth
from services.search.details import with_details
from services.search.legs import HYBRID_MODES, KEYWORD_MODES
from services.search.passages import distinct_passages
from services.sources.service import SourceService

#: Searching as a profile, a result from its first source gains this much score for ordering, its last
#: source none (linearly between): results closer than this are ordered by the profile's source order,
#: results further apart never swap. The `score` shown is the strategy's own, unboosted.
SOURCE_ORDER_BOOST = 0.01
MAX_QUERY_CHARS = 2000
#: Chunks fetched per result wanted, so merging and the per-document cap still leave a full list.
POOL_FACTOR = 3
POOL_MAX = 100
PENDING_SQL = (
    "SELECT count(*) FROM chunks WHERE embedding IS NULL AND ($1::uuid[] IS NULL OR source_id = ANY($1::uuid[]))"
)


@dataclass
class SearchOutcome:
    hits: list[SearchHit]
    match_count: int  # what was used, after capping
    capped: bool
    filtered_by_threshold: int  # chunks of the candidate pool under the threshold
    pending_embeddings: int = 0  # chunks in scope not embedded yet: keyword-searchable, unseen by `vector`
    flagged_left_out: int = 0  # candidates with injection flags (or unscanned) a profile left out
    #: the query's lexemes as the keyword index analyses it (stop words out, stemmed, names whole): what
    #: a result's window looks for (services/search/window.py)
    query_terms: list[str] = field(default_factory=list)


#: search types that run hybrid search (`code` over code documents only)
HYBRID_TYPES = ("hybrid", "code", "question")


def check_modes(search_type: str, keyword_mode: str | None, hybrid_mode: str | None) -> None:
    if keyword_mode is not None and keyword_mode not in KEYWORD_MODES:
        raise InvalidArgument(f"Invalid keyword_mode '{keyword_mode[:50]}'.", "Use keyword_mode='any' or 'all'.")
    if hybrid_mode is not None and hybrid_mode not in HYBRID_MODES:
        raise InvalidArgument(f"Invalid hybrid_mode '{hybrid_mode[:50]}'.", "Use hybrid_mode='weighted' or 'filter'.")
    if hybrid_mode is not None and search_type not in HYBRID_TYPES:
        raise InvalidArgument(
            f"hybrid_mode applies to hybrid search, not '{search_type}'.", "Leave hybrid_mode out, or search hybrid."
        )
    if keyword_mode is not None and search_type == "vector":
        raise InvalidArgument("vector search has no keyword leg: keyword_mode does not apply.", "Leave it out.")


def check_search_args(
    query: str, match_count: int, search_type: str, threshold: float | None, keyword_weight: float | None = None
) -> None:
    if not query or not query.strip():
        raise InvalidArgument("query must not be empty.", "Pass a natural-language question or keywords.")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidArgument(
            f"query is {len(query)} characters, over the {MAX_QUERY_CHARS} limit.", "Shorten the query."
        )
    if search_type not in SEARCH_TYPES:
        raise InvalidArgument(f"Invalid search_type '{search_type}'.", f"Use one of: {', '.join(SEARCH_TYPES)}.")
    if match_count < 1:
        raise InvalidArgument(f"match_count must be at least 1 (got {match_count}).", "Use match_count=10.")
    if threshold is not None and not 0.0 <= threshold <= 1.0:
        raise InvalidArgument(
            f"similarity_threshold must be between 0 and 1 (got {threshold}).",
            "Use e.g. 0.3; higher is stricter, omit it for no floor.",
        )
    if keyword_weight is not None and not 0.0 <= keyword_weight <= 1.0:
        raise InvalidArgument(
            f"keyword_weight must be between 0 and 1 (got {keyword_weight}).",
            "Use e.g. 0.3 (the vector leg gets 1 - keyword_weight); omit it for the server's weights.",
        )


def by_source_order(hits: list[SearchHit], order: list[UUID], boost: float = SOURCE_ORDER_BOOST) -> list[SearchHit]:
    """Hits reordered by score plus a boost for their source's place in `order` (first: `boost`, last:
    0); equal boosted scores go by source order, then by the strategy's own order."""
    if len(order) < 2:
        return hits
    place = {sid: i for i, sid in enumerate(order)}
    last = len(order) - 1

    def key(item: tuple[int, SearchHit]) -> tuple[float, int, int]:
        rank, hit = item
        position = place.get(hit.source_id, last)
        return (-(hit.score + boost * (last - position) / last), position, rank)

    return [hit for _, hit in sorted(enumerate(hits), key=key)]


class SearchService:
    """Builds strategies lazily (the reranker model loads on the first rerank search)."""

    def __init__(
        self,
        db: Database,
        sources: SourceService,
        embedder: Embedder,
        settings: Settings,
        reranker_factory: Callable[[], Reranker],
    ) -> None:
        self.db = db
        self.sources = sources
        self.embedder = embedder
        self.settings = settings
        self._reranker_factory = reranker_factory
        self._strategies: dict[str, SearchStrategy] = {}

    def strategy(self, search_type: str) -> SearchStrategy:
        if search_type not in self._strategies:
            self._strategies[search_type] = self._build(search_type)
        return self._strategies[search_type]

    def _build(self, search_type: str) -> SearchStrategy:
        if search_type == "filter":
            from services.search.hybrid import HybridSearch
            from services.search.keyword import FilterSearch

            hybrid = self.strategy("hybrid")
            assert isinstance(hybrid, HybridSearch)
            return FilterSearch(hybrid)
        if search_type == "vector":
            from services.search.vector import VectorSearch

            return VectorSearch(self.db)
        if search_type == "hybrid":
            from services.search.hybrid import HybridSearch

            return HybridSearch(self.db, self.settings)
        from services.search.hybrid import HybridSearch

        if search_type == "keyword":
            from services.search.keyword import KeywordSearch

            hybrid = self.strategy("hybrid")  # shares its term-statistics cache
            assert isinstance(hybrid, HybridSearch)
            return KeywordSearch(hybrid)
        from services.search.rerank import RerankSearch

        hybrid = self.strategy("hybrid")  # one first stage (and one term-statistics cache) for both
        assert isinstance(hybrid, HybridSearch)
        return RerankSearch(hybrid, self._reranker_factory(), self.settings)

    async def search(
        self,
        query: str,
        source_id: str | UUID | None = None,
        match_count: int = 10,
        search_type: str = "hybrid",
        similarity_threshold: float | None = None,
        keyword_weight: float | None = None,
        *,
        source_ids: list[str] | None = None,
        source_order: list[UUID] | None = None,
        exclude_flagged: bool = False,
        keyword_mode: str | None = None,
        hybrid_mode: str | None = None,
    ) -> SearchOutcome:
        """`source_ids` adds sources to `source_id` (each checked like it); `source_order` (a profile's
        sources, first first) breaks near-ties, see `by_source_order`; `exclude_flagged` drops candidates
        with injection flags or not scanned yet (services/flags) from the pool (POOL_FACTOR x the results
        wanted) before passages are formed. `keyword_mode` "all": the keyword leg keeps chunks holding
        every informative term; `hybrid_mode` "filter": the keyword leg's matches in vector order
        (services/search/legs.py, keyword.py)."""
        check_search_args(query, match_count, search_type, similarity_threshold, keyword_weight)
        check_modes(search_type, keyword_mode, hybrid_mode)
        searched = await self.searched_sources(source_id, source_ids)
        limit = min(match_count, MAX_PER_PAGE)
        if searched == []:  # a scope without sources: nothing to find
            return SearchOutcome([], limit, match_count > limit, 0)
        run = search_type if search_type not in HYBRID_TYPES else "filter" if hybrid_mode == "filter" else "hybrid"
        strategy = self.strategy(run)
        vector, pending, terms, keyword_terms, small = await asyncio.gather(
            embed_query_async(self.embedder, query.strip()),
            self.pending_embeddings(searched),
            self.query_lexemes(query.strip()),
            self.keyword_terms(run, query.strip()),  # the keyword leg's statistics, beside the embedding
            SearchBreadth.of(self.db).small_scope(searched),  # few chunks: the vector leg scans them all
        )
        pool = min(max(limit * POOL_FACTOR, limit + 10), POOL_MAX)
        request = SearchRequest(
            query.strip(), vector, pool, searched, keyword_weight, pending, keyword_mode or "any", search_type == "code"
        )
        request.query_terms = keyword_terms
        request.small_scope = small
        hits = await strategy.search(request)
        trusted = [h for h in hits if not h.flags] if exclude_flagged else hits
        kept = [h for h in trusted if similarity_threshold is None or h.similarity >= similarity_threshold]
        kept = by_source_order(kept, source_order or [])
        passages = await with_details(self.db, distinct_passages(kept, limit, self.settings.results_per_document))
        return SearchOutcome(
            passages,
            limit,
            match_count > limit,
            len(trusted) - len(kept),
            pending,
            flagged_left_out=len(hits) - len(trusted),
            query_terms=terms,
        )

    async def keyword_terms(self, run: str, query: str) -> QueryTerms | None:
        """The keyword leg's terms and their idf for a search type with a keyword leg (BM25), else None."""
        if run == "vector" or self.settings.keyword_ranking != "bm25":
            return None
        from services.search.hybrid import HybridSearch

        hybrid = self.strategy("hybrid")
        assert isinstance(hybrid, HybridSearch)
        return await hybrid.main_terms(query)

    async def query_lexemes(self, query: str) -> list[str]:
        """The query as the keyword index analyses it (sql/030's archivist_tsvector)."""
        return list(await self.db.pool.fetchval(QUERY_LEXEMES_SQL.format(fts_config=self.db.fts_config), query) or [])

    async def pending_embeddings(self, source_ids: list[UUID] | None) -> int:
        """Chunks in the searched scope still waiting for their vector (two-phase indexing)."""
        return int(await self.db.pool.fetchval(PENDING_SQL, source_ids))

    async def searched_sources(
        self, source_id: str | UUID | None, source_ids: list[str] | None = None
    ) -> list[UUID] | None:
        """The sources a search reads, filtered inside the SQL so a small scope still gets a full list:
        the given sources (each NotFound outside the caller's scope), else the scope's, else all (None)."""
        given = ([source_id] if source_id else []) + list(source_ids or [])
        if len(given) > MAX_PER_PAGE:
            raise InvalidArgument(f"{len(given)} sources given; at most {MAX_PER_PAGE}.", "Search fewer sources.")
        if given:
            return list(dict.fromkeys([(await self.sources.get(sid)).id for sid in given]))
        scope = current_scope()
        return sorted(scope.source_ids) if scope.source_ids is not None else None
