"""Hybrid retrieval: reciprocal-rank (or convex) fusion of HNSW vector top-N (exact over a few sources'
chunks, services/search/vector.py) and full-text top-N, as one SQL query; by default its legs run as
two statements on two connections at once and a third fuses them with the same SQL
(services/search/parallel.py, `hybrid_parallel_legs`), with the same results.

A query naming an identifier that an API reference page in scope documents gets a third leg: the chunk
holding that entry is lifted (services/search/names.py); any other query is ranked by the two legs alone.

Chunks not embedded yet (two-phase indexing: the backlog has not reached them) are found by the
keyword leg alone; in their fusion the vector leg's share is stood in for by their keyword evidence
(RRF: their keyword rank; convex: their normalised keyword score), so a half-embedded source answers
well and a source with no vectors yet ranks by BM25. With no pending chunk in the searched scope the
SQL and its parameters are exactly the fully-embedded ones.

With BM25 ranking, pending chunks get a keyword leg of their own that keeps the question's common
terms (services/search/pending.py): they have nothing else to rank by.

The keyword leg ORs the query's terms (an AND of every term matches almost nothing for natural
questions) and ranks them either with BM25 (`keyword_ranking = "bm25"`, services/search/bm25.py)
or with `ts_rank(..., 1)` (`"ts_rank"`, the length-normalised PostgreSQL ranking used before).
For ts_rank, terms that ANALYZE's statistics show in more than
`keyword_max_term_frequency` of all chunks are left out: they carry almost no information (a
tiny IDF), yet an OR with them matches a large share of the corpus, and ranking every match is
what made the keyword leg slow at scale.
"""

from __future__ import annotations

import asyncio
import time
from uuid import UUID

import asyncpg

from models import SearchHit
from services.core.database import Database
from services.core.settings import Settings
from services.search import parallel
from services.search.base import HIT_COLUMNS, TS_QUERY_LEXEMES_SQL, SearchRequest, SearchStrategy, to_hit
from services.search.bm25 import QueryTerms, query_terms
from services.search.breadth import SearchBreadth
from services.search.legs import code_filter, keyword_leg, uses_topk
from services.search.names import NameEvidence
from services.search.pending import pending_fusion, pending_leg
from services.search.vector import EXACT_NEAREST, HNSW_NEAREST

# $1 query vector, $2 source filter, $3 depth per leg, $4 keyword terms (see the leg), $5 vector weight,
# $6 keyword weight, $7 rrf k, $8 final limit (BM25 adds $9-$12, see services/search/bm25.py)
_VEC_LEG = """vec AS (
    SELECT id, dist, row_number() OVER (ORDER BY dist, id) AS rnk FROM (
        {nearest}
    ) v
)"""
VEC_LEG = _VEC_LEG.replace("{nearest}", HNSW_NEAREST)
#: the vector leg over a small filtered set, exact (services/search/vector.py `EXACT_NEAREST`)
VEC_LEG_EXACT = _VEC_LEG.replace("{nearest}", EXACT_NEAREST)
FUSED_TAIL = """SELECT {hit_columns}, fused.rrf, fused.vrank, fused.krank
FROM fused JOIN chunks c ON c.id = fused.id JOIN documents d ON d.id = c.document_id
ORDER BY fused.rrf DESC, c.id
"""
HYBRID_SQL = "\nWITH " + VEC_LEG + ",\n{keyword_leg},\n{fusion}\n" + FUSED_TAIL
HYBRID_EXACT_SQL = "\nWITH " + VEC_LEG_EXACT + ",\n{keyword_leg},\n{fusion}\n" + FUSED_TAIL
#: the fusion alone, over the legs' rows run apart (services/search/parallel.py): `{legs}` their CTEs
FUSED_SQL = "\nWITH {legs},\n{fusion}\n" + FUSED_TAIL

# Reciprocal-rank fusion: weight / (k + rank) summed over the legs.
RRF_FUSION = """fused AS (
    SELECT coalesce(vec.id, kw.id) AS id, vec.rnk AS vrank, kw.rnk AS krank,
           coalesce($5::float8 / ($7::float8 + vec.rnk), 0) + coalesce($6::float8 / ($7::float8 + kw.rnk), 0) AS rrf
    FROM vec FULL OUTER JOIN kw ON vec.id = kw.id
    ORDER BY rrf DESC, id LIMIT $8
)"""

# The same, when some chunks in scope have no vector yet: a pending chunk (outside the vector leg)
# counts its keyword rank for both legs.
RRF_FUSION_PENDING = """fused AS (
    SELECT j.id, j.vrank, j.krank,
           coalesce($5::float8 / ($7::float8 + j.vrank),
                    $5::float8 / ($7::float8 + CASE WHEN p.id IS NOT NULL THEN j.krank END), 0)
           + coalesce($6::float8 / ($7::float8 + j.krank), 0) AS rrf
    FROM (SELECT coalesce(vec.id, kw.id) AS id, vec.rnk AS vrank, kw.rnk AS krank
          FROM vec FULL OUTER JOIN kw ON vec.id = kw.id) j
    LEFT JOIN chunks p ON p.id = j.id AND j.vrank IS NULL AND p.embedding IS NULL
    ORDER BY rrf DESC, j.id LIMIT $8
)"""

# Convex combination of scores, each min-max normalised over the candidates of both legs: cosine
# similarity (computed for keyword-only candidates too) and the keyword score (0 when unmatched).
# Weighted by $5 / $6 and divided by their sum, so 0-1. ($7, the RRF k, is not used.) A chunk without a
# vector (pending) has no cosine: its normalised keyword score stands in for the normalised cosine.
CONVEX_FUSION = """cand AS (
    SELECT coalesce(vec.id, kw.id) AS id, vec.rnk AS vrank, kw.rnk AS krank, vec.dist, kw.kscore
    FROM vec FULL OUTER JOIN kw ON vec.id = kw.id
),
scored AS (
    SELECT cand.id, cand.vrank, cand.krank, coalesce(cand.kscore, 0) AS ks,
           1 - coalesce(cand.dist, c.embedding <=> $1) AS cos
    FROM cand JOIN chunks c ON c.id = cand.id
),
fused AS (
    SELECT id, vrank, krank,
           ($5::float8 * coalesce((cos - min(cos) OVER ()) / greatest(max(cos) OVER () - min(cos) OVER (), 1e-9),
                                  ks / greatest(max(ks) OVER (), 1e-9))
            + $6::float8 * ks / greatest(max(ks) OVER (), 1e-9)) / ($5::float8 + $6::float8) AS rrf
    FROM scored WHERE $7::float8 IS NOT NULL
    ORDER BY rrf DESC, id LIMIT $8
)"""

TERM_STATS_SQL = """
SELECT s.most_common_elems::text::text[] AS elems, s.most_common_elem_freqs AS freqs,
       (SELECT coalesce(sum(chunks), 0) FROM bm25_totals) AS chunks
FROM pg_stats s
WHERE s.schemaname = current_schema() AND s.tablename = 'chunks' AND s.attname = 'tsv'
"""
STATS_TTL_SECONDS = 300.0
MIN_TERMS = 2


def quote_lexeme(lexeme: str) -> str:
    """A lexeme as a quoted tsquery operand, taken literally (no re-stemming)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def informative_terms(lexemes: list[str], frequencies: dict[str, float], max_frequency: float) -> list[str]:
    """Lexemes rarer than `max_frequency` (share of chunks containing them); when every term is
    common, the `MIN_TERMS` rarest, so the keyword leg still has something to match."""
    kept = [lex for lex in lexemes if frequencies.get(lex, 0.0) <= max_frequency]
    if kept or not lexemes:
        return kept
    return sorted(lexemes, key=lambda lex: frequencies.get(lex, 0.0))[:MIN_TERMS]


def or_query(lexemes: list[str], operator: str = "|") -> str | None:
    """The lexemes as tsquery text, ORed (or ANDed with `operator="&"`)."""
    return f" {operator} ".join(quote_lexeme(lex) for lex in lexemes) or None


class TermStatistics:
    """Share of chunks containing each common lexeme, read from PostgreSQL's own statistics on
    `chunks.tsv` (kept by ANALYZE / autovacuum) and cached for a few minutes.

    Only a corpus of at least `min_chunks` chunks uses them: below that, counting a term's postings
    (at most `keyword_max_term_frequency` of the chunks) costs little, and the statistics, sampled
    whenever autovacuum last ran (mid-crawl, say), made the same question rank differently from one
    run to the next (bench/docs.py, MkDocs hybrid MRR@10 0.77-0.84 over identical vectors)."""

    def __init__(self, db: Database, min_chunks: int = 0) -> None:
        self.db = db
        self.min_chunks = min_chunks
        self._frequencies: dict[str, float] = {}
        self._loaded_at = float("-inf")

    async def frequencies(self) -> dict[str, float]:
        if time.monotonic() - self._loaded_at > STATS_TTL_SECONDS:
            row = await self.db.pool.fetchrow(TERM_STATS_SQL)
            elems = (row and row["elems"]) or []
            freqs = (row and row["freqs"]) or []
            if row is None or row["chunks"] < self.min_chunks:
                elems = []
            self._frequencies = dict(zip(elems, freqs, strict=False))  # freqs carries 3 trailing summary values
            self._loaded_at = time.monotonic()
        return self._frequencies


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
        self.term_stats = TermStatistics(db, settings.keyword_statistics_min_chunks)
        self.names = NameEvidence(db)

    def _parts(self, pending: int = 0, mode: str = "any", exact: bool = False) -> tuple[str, str, str]:
        """The vector leg (`exact`: over every chunk of the searched sources), the keyword leg(s) and the
        fusion of the hybrid query (code marks unfilled)."""
        s = self.settings
        leg = keyword_leg(s, mode)
        if pending and s.keyword_ranking == "bm25":  # pending chunks rank by a keyword leg of their own
            topk = uses_topk(s, mode)
            leg += "," + pending_leg(pending, topk, 15 if topk else 13)
            fusion = pending_fusion(s.hybrid_fusion == "convex", 15 if topk else 13)
        elif s.hybrid_fusion == "convex":
            fusion = CONVEX_FUSION
        else:
            fusion = RRF_FUSION_PENDING if pending else RRF_FUSION
        vec_filter = "embedding IS NOT NULL AND " if pending else ""
        vec_leg = (VEC_LEG_EXACT if exact else VEC_LEG).format(vec_filter=vec_filter)
        return vec_leg, leg, fusion

    def _sql(self, pending: int = 0, mode: str = "any", code_only: bool = False, exact: bool = False) -> str:
        """The hybrid query as one statement; `pending`: chunks in scope with no vector yet; `mode`: the
        keyword mode; `code_only`: code documents only (services/search/legs.py); `exact`: the vector
        leg over every chunk of the searched sources."""
        _, leg, fusion = self._parts(pending, mode)
        vec_filter = "embedding IS NOT NULL AND " if pending else ""
        template = HYBRID_EXACT_SQL if exact else HYBRID_SQL
        sql = template.format(keyword_leg=leg, fusion=fusion, hit_columns=HIT_COLUMNS, vec_filter=vec_filter)
        return code_filter(sql, code_only)

    async def keyword_args(
        self, text: str, depth: int = 0, pending: bool = False, mode: str = "any", terms: QueryTerms | None = None
    ) -> tuple[list, float]:
        """Query parameters of the keyword leg ($4, and $9-$12 for BM25, $13-$14 over impact order),
        and the query's exactness (services/search/bm25.py `exactness`; 0 with ts_rank); `pending`
        (BM25): the pending leg's terms and idfs follow. `mode="all"`: the terms rarest first. `terms`:
        the query's terms when already read (`main_terms`, beside the query's embedding)."""
        s = self.settings
        if s.keyword_ranking != "bm25":
            return [await self.keyword_query(text, "&" if mode == "all" else "|")], 0.0
        frequencies = await self.term_stats.frequencies()
        if terms is None:
            terms = await self.main_terms(text)
        kept, idfs = terms.terms, terms.idfs
        if mode == "all":
            pairs = sorted(zip(kept, idfs, strict=True), key=lambda p: (-p[1], p[0]))
            kept, idfs = [t for t, _ in pairs], [i for _, i in pairs]
        args = [kept, idfs, float(s.bm25_k1), float(s.bm25_b), terms.avgdl]
        if uses_topk(s, mode):
            args += [s.bm25_postings_per_term, max(s.bm25_candidates, s.hybrid_candidates, depth)]
        if pending:
            every = await query_terms(self.db, text, s.keyword_pending_max_term_frequency, frequencies)
            args += [every.terms, every.idfs]
        return args, terms.exactness

    async def main_terms(self, text: str) -> QueryTerms:
        """The keyword leg's terms with their idf (BM25; none with ts_rank): one statement that needs no
        vector, so a search reads them while the query is embedded."""
        s = self.settings
        if s.keyword_ranking != "bm25":
            return QueryTerms()
        frequencies = await self.term_stats.frequencies()
        return await query_terms(self.db, text, s.keyword_max_term_frequency, frequencies, s.hybrid_rare_term_share)

    async def keyword_query(self, text: str, operator: str = "|") -> str | None:
        """The query's informative lexemes ORed (or ANDed), as tsquery text (None when there are none)."""
        lexemes = await self.db.pool.fetchval(TS_QUERY_LEXEMES_SQL.format(fts_config=self.db.fts_config), text)
        frequencies = await self.term_stats.frequencies()
        kept = informative_terms(lexemes or [], frequencies, self.settings.keyword_max_term_frequency)
        return or_query(kept, operator)

    async def fused_rows(self, request: SearchRequest, limit: int) -> list:
        """The fused candidates, best first (with the name leg when the query names a documented
        identifier): the legs on two connections at once, or with `hybrid_parallel_legs` off in one
        statement; the same rows either way."""
        s = self.settings
        legs = self._parallel_rows if s.hybrid_parallel_legs else self._one_statement_rows
        named_task = self._named(request) if s.hybrid_name_weight > 0 else _nothing()
        (rows, weights), named = await asyncio.gather(legs(request, limit), named_task)
        if not named:
            return rows
        share = float(s.hybrid_name_weight) / max(sum(weights), 1e-9)
        return await self.names.fuse(rows, named, request.query_vector, share, self.max_rrf(request), limit)

    async def _named(self, request: SearchRequest) -> set[UUID]:
        return await self.names.chunks(request.query, request.source_ids, request.code_only)

    def _params(self, request: SearchRequest, limit: int, keyword: list, weights: tuple[float, float]) -> list:
        """The hybrid query's parameters, $1 on (see `HYBRID_SQL`)."""
        depth = max(self.settings.hybrid_candidates, limit)
        head = [request.query_vector, request.source_ids, depth, keyword[0], *weights]
        return [*head, float(self.settings.rrf_k), limit, *keyword[1:]]

    async def _one_statement_rows(self, request: SearchRequest, limit: int) -> tuple[list, tuple[float, float]]:
        depth = max(self.settings.hybrid_candidates, limit)
        pending, mode = request.pending_embeddings, request.keyword_mode
        keyword, exact = await self.keyword_args(request.query, depth, pending > 0, mode, request.query_terms)
        weights = self.weights(request, exact)
        sql = self._sql(pending, mode, request.code_only, request.exact_vectors)
        params = self._params(request, limit, keyword, weights)
        rows = await SearchBreadth.of(self.db).fetch(sql, *params, filtered=request.filtered)
        return rows, weights

    async def _parallel_rows(self, request: SearchRequest, limit: int) -> tuple[list, tuple[float, float]]:
        pending, code = request.pending_embeddings, request.code_only
        vec_leg, kw_leg, fusion = self._parts(pending, request.keyword_mode, request.exact_vectors)
        placeholder = (0.0, 0.0)  # the legs read no weight; the fusion gets the real ones
        vec_sql, vec_args = parallel.renumbered(
            code_filter(parallel.VECTOR_ROWS_SQL.format(vec_leg=vec_leg), code),
            self._params(request, limit, [None], placeholder),
        )
        # both legs and the fusion read one snapshot: an update committed between them must not
        # leave the fusion looking up chunks the legs saw and it no longer does
        async with SearchBreadth.of(self.db).shared_snapshot(request.filtered) as (vec_conn, kw_conn):
            if kw_conn is None:
                vec_rows = list(await vec_conn.fetch(vec_sql, *vec_args))
                keyword, exact, kw_rows = await self._keyword_rows(request, limit, kw_leg, vec_conn)
            else:
                (keyword, exact, kw_rows), vec_rows = await asyncio.gather(
                    self._keyword_rows(request, limit, kw_leg, kw_conn), vec_conn.fetch(vec_sql, *vec_args)
                )
            weights = self.weights(request, exact)
            params = self._params(request, limit, keyword, weights)
            score = "float8" if self.settings.keyword_ranking == "bm25" else "real"
            with_kwp = pending > 0 and self._pending_leg
            legs = parallel.leg_arrays(len(params) + 1, with_kwp, score)
            arrays = parallel.columns(vec_rows, "dist") + parallel.keyword_columns(kw_rows, with_kwp)
            sql = code_filter(FUSED_SQL.format(legs=legs, fusion=fusion, hit_columns=HIT_COLUMNS), code)
            sql, args = parallel.renumbered(sql, [*params, *arrays])
            return list(await vec_conn.fetch(sql, *args)), weights

    @property
    def _pending_leg(self) -> bool:
        """Whether a search with pending chunks has the pending keyword leg (`kwp`, BM25 only)."""
        return self.settings.keyword_ranking == "bm25"

    async def _keyword_rows(
        self, request: SearchRequest, limit: int, leg: str, conn: asyncpg.Connection
    ) -> tuple[list, float, list]:
        """The keyword leg's arguments, the query's exactness and the leg's rows on `conn` (term
        statistics first, from the pool: they steer the query, not which chunks it reads)."""
        depth = max(self.settings.hybrid_candidates, limit)
        pending, mode = request.pending_embeddings > 0, request.keyword_mode
        keyword, exact = await self.keyword_args(request.query, depth, pending, mode, request.query_terms)
        if not keyword[0] and not pending:  # no informative term: no keyword candidate
            return keyword, exact, []
        template = parallel.KEYWORD_PENDING_ROWS_SQL if pending and self._pending_leg else parallel.KEYWORD_ROWS_SQL
        sql = code_filter(template.format(keyword_leg=leg), request.code_only)
        sql, args = parallel.renumbered(sql, self._params(request, limit, keyword, (0.0, 0.0)))
        return keyword, exact, list(await conn.fetch(sql, *args))

    def weights(self, request: SearchRequest | None = None, exact: float = 0.0) -> tuple[float, float]:
        """(vector, keyword) weights: the request's keyword weight (a profile's default) as given; else the
        settings', the keyword weight raised toward `hybrid_exact_keyword_weight` by the query's exactness
        (a query of rare names or marker words is decided by the chunks holding them, a question in
        common words mostly by meaning)."""
        if request is not None and request.keyword_weight is not None:
            return 1.0 - float(request.keyword_weight), float(request.keyword_weight)
        s = self.settings
        vector, keyword = float(s.hybrid_vector_weight), float(s.hybrid_keyword_weight)
        share = keyword / max(vector + keyword, 1e-9)
        target = max(share, float(s.hybrid_exact_keyword_weight))
        raised = share + (target - share) * min(max(exact, 0.0), 1.0)
        total = vector + keyword
        return total * (1.0 - raised), total * raised

    def max_rrf(self, request: SearchRequest | None = None) -> float:
        s = self.settings
        if s.hybrid_fusion == "convex":
            return 1.0
        return max(sum(self.weights(request)), 1e-9) / (s.rrf_k + 1)

    async def search(self, request: SearchRequest) -> list[SearchHit]:
        rows = await self.fused_rows(request, request.limit)
        top = self.max_rrf(request)
        return [to_hit(_hit_fields(r), r["rrf"] / top, match_type(r["vrank"], r["krank"])) for r in rows]


async def _nothing() -> set[UUID]:
    return set()


def _hit_fields(row) -> dict:
    return {k: v for k, v in dict(row).items() if k not in ("rrf", "vrank", "krank")}
