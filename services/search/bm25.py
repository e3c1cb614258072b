"""BM25 keyword ranking inside PostgreSQL, over the `chunk_terms` inverted index (sql/004_bm25.sql).

    score(chunk) = sum over query terms t of  idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
    idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))

tf (occurrences of the lexeme in the chunk's title + heading path + text), dl (the chunk's length in
lexemes), df (chunks containing the lexeme), N and avgdl all come from tables the chunk triggers keep
up to date on every insert, update and delete; one query per search reads the query terms' df and the
corpus totals, and the scoring runs in the hybrid query itself. A term PostgreSQL's statistics list
among `chunks.tsv`'s most common elements gets its df estimated from them (share x N: these are
the terms with the longest postings, whose counting cost ~60 ms a query at a million chunks); the
others, rare, are counted from the index (never more than the pruning threshold allows). Terms in
more than `keyword_max_term_frequency` of chunks are left out (tiny idf, huge match lists), unless
every term is that common.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from services.core.database import Database

#: Query lexemes with their document frequency (counted up to `$2` chunks; NULL for the lexemes in
#: `$3`, whose df the statistics estimate), the corpus totals, and the query words (split at white
#: space, numbered from 1) each lexeme comes from.
TERM_STATS_SQL = """
WITH tot AS (SELECT coalesce(sum(chunks), 0)::float8 AS n, coalesce(sum(length), 0)::float8 AS len FROM bm25_totals),
terms AS (SELECT DISTINCT unnest(tsvector_to_array(archivist_tsvector('{fts_config}'::regconfig, $1))) AS term),
words AS (
    SELECT x.i, unnest(tsvector_to_array(archivist_tsvector('{fts_config}'::regconfig, x.w))) AS term
    FROM regexp_split_to_table($1, '[[:space:]]+') WITH ORDINALITY AS x(w, i)
)
SELECT terms.term, tot.n, tot.len,
       CASE WHEN terms.term = ANY($3::text[]) THEN NULL  -- estimated from the statistics: not counted
            ELSE (SELECT count(*) FROM (SELECT 1 FROM chunk_terms t WHERE t.term = terms.term LIMIT $2) x) END AS df,
       ARRAY(SELECT words.i FROM words WHERE words.term = terms.term) AS words
FROM terms, tot
ORDER BY terms.term
"""
EXACT_DF_SQL = "SELECT count(*) FROM chunk_terms WHERE term = $1"
MIN_TERMS = 2

# The keyword leg of the hybrid query: $3 depth, $4 terms, $9 idfs, $10 k1, $11 b, $12 avgdl.
BM25_LEG = """
kw AS (
    SELECT id, rank AS kscore, row_number() OVER (ORDER BY rank DESC, id) AS rnk FROM (
        SELECT t.chunk_id AS id,
               sum(q.idf * t.tf * ($10::float8 + 1)
                   / (t.tf + $10::float8 * (1 - $11::float8 + $11::float8 * t.dl / $12::float8))) AS rank
        FROM unnest($4::text[], $9::float8[]) AS q(term, idf)
        CROSS JOIN LATERAL (  -- OFFSET 0: kept a per-term index range scan, never a hash join
            SELECT chunk_id, tf, dl FROM chunk_terms t
            WHERE t.term = q.term AND ($2::uuid[] IS NULL OR t.source_id = ANY($2::uuid[])){code:t.chunk_id} OFFSET 0
        ) t
        GROUP BY t.chunk_id ORDER BY rank DESC LIMIT $3
    ) k
)"""


# The same leg over impact-ordered postings (sql/012): each term's $13 highest-impact postings
# (chunk_terms_impact_idx, index only), the $14 chunks with the largest sum(idf * impact) as
# candidates, and exact BM25 for those candidates only (primary-key lookups for tf and dl).
BM25_TOPK_LEG = """
kw AS (
    SELECT id, rank AS kscore, row_number() OVER (ORDER BY rank DESC, id) AS rnk FROM (
        SELECT e.chunk_id AS id,
               sum(q.idf * e.tf * ($10::float8 + 1)
                   / (e.tf + $10::float8 * (1 - $11::float8 + $11::float8 * e.dl / $12::float8))) AS rank
        FROM (
            SELECT p.chunk_id FROM unnest($4::text[], $9::float8[]) AS q(term, idf)
            CROSS JOIN LATERAL (
                SELECT t.chunk_id, t.impact FROM chunk_terms t
                WHERE t.term = q.term AND ($2::uuid[] IS NULL OR t.source_id = ANY($2::uuid[])){code:t.chunk_id}
                ORDER BY t.impact DESC LIMIT $13
            ) p
            GROUP BY p.chunk_id ORDER BY sum(q.idf * p.impact) DESC, p.chunk_id LIMIT $14
        ) cand
        CROSS JOIN unnest($4::text[], $9::float8[]) AS q(term, idf)
        JOIN chunk_terms e ON e.term = q.term AND e.chunk_id = cand.chunk_id
        GROUP BY e.chunk_id ORDER BY rank DESC LIMIT $3
    ) k
)"""


# keyword_mode="all": only chunks holding every term. Driven from the postings of $4[1] (the terms come
# rarest first), each candidate's other terms looked up by primary key; exact, no impact cut-off.
BM25_ALL_LEG = """
kw AS (
    SELECT id, rank AS kscore, row_number() OVER (ORDER BY rank DESC, id) AS rnk FROM (
        SELECT e.chunk_id AS id,
               sum(q.idf * e.tf * ($10::float8 + 1)
                   / (e.tf + $10::float8 * (1 - $11::float8 + $11::float8 * e.dl / $12::float8))) AS rank
        FROM (
            SELECT t.chunk_id FROM chunk_terms t
            WHERE t.term = ($4::text[])[1] AND ($2::uuid[] IS NULL OR t.source_id = ANY($2::uuid[])){code:t.chunk_id}
        ) cand
        CROSS JOIN unnest($4::text[], $9::float8[]) AS q(term, idf)
        JOIN chunk_terms e ON e.term = q.term AND e.chunk_id = cand.chunk_id
        GROUP BY e.chunk_id HAVING count(*) = cardinality($4::text[])
        ORDER BY rank DESC LIMIT $3
    ) k
)"""


@dataclass
class QueryTerms:
    """The informative query lexemes with their idf, and the corpus' average chunk length."""

    terms: list[str] = field(default_factory=list)
    idfs: list[float] = field(default_factory=list)
    avgdl: float = 1.0
    #: share of the query's idf carried by rare lexemes (see `exactness`): 1.0 for a query that is
    #: nothing but a rare name or marker word, near 0 for a question in common words
    exactness: float = 0.0


def idf(chunks: float, df: float) -> float:
    """BM25 idf (the Lucene form: never negative)."""
    return math.log(1.0 + (chunks - df + 0.5) / (df + 0.5))


def exactness(
    df: Mapping[str, int], chunks: float, rare_share: float, words: Mapping[str, list[int]] | None = None
) -> float:
    """How much of a query is exact terms, by its words: each word (a lexeme without `words`, else the
    white-space separated word its lexemes come from) weighs the idf of its rarest lexeme the corpus
    holds, and is rare when that lexeme is in at most `rare_share` of the chunks (at least one chunk);
    exactness is the rare words' weight over all words'. A name is one word: `pg_stat_statements` is as
    rare as its whole form, whatever its parts. Words absent from the corpus count for nothing."""
    rarest: dict[object, int] = {}
    for term, n in df.items():
        if n <= 0:
            continue
        for word in (words or {}).get(term) or (term,):
            rarest[word] = min(rarest.get(word, n), n)
    total = sum(idf(chunks, n) for n in rarest.values())
    limit = max(1.0, rare_share * chunks)
    rare = sum(idf(chunks, n) for n in rarest.values() if n <= limit)
    return rare / total if total > 0 else 0.0


def bm25_term(tf: float, dl: float, avgdl: float, idf_value: float, k1: float, b: float) -> float:
    """One term's contribution, as the SQL computes it (kept here for the tests and for reading)."""
    return idf_value * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))


async def query_terms(
    db: Database,
    text: str,
    max_frequency: float,
    estimates: Mapping[str, float] | None = None,
    rare_share: float = 0.0,
) -> QueryTerms:
    """The query's lexemes rarer than `max_frequency` of all chunks (else the `MIN_TERMS` rarest).

    `estimates` maps lexemes to the share of chunks containing them, from PostgreSQL's statistics
    (`TermStatistics`): those get df = share x N without counting their postings, the slow part at
    a million chunks; the others are counted.
    """
    estimates = estimates or {}
    total = float(await db.pool.fetchval("SELECT coalesce(sum(chunks), 0) FROM bm25_totals"))
    cap = int(total * max_frequency) + 1
    rows = await db.pool.fetch(TERM_STATS_SQL.format(fts_config=db.fts_config), text, cap, list(estimates))
    if not rows:
        return QueryTerms()
    chunks, length = rows[0]["n"], rows[0]["len"]
    avgdl = max(length / chunks, 1.0) if chunks else 1.0
    df = {
        r["term"]: int(r["df"]) if r["df"] is not None else max(round(estimates[r["term"]] * chunks), 1) for r in rows
    }
    kept = [t for t, n in df.items() if n > 0 and n <= max_frequency * chunks]
    if not kept:  # every term is common (or absent): the rarest present ones (counted ones exactly)
        present = [t for t, n in df.items() if n > 0]
        for term in present:
            if term not in estimates:
                df[term] = int(await db.pool.fetchval(EXACT_DF_SQL, term))
        kept = sorted(present, key=lambda t: (df[t], t))[:MIN_TERMS]
    words = {r["term"]: list(r["words"]) for r in rows}
    exact = exactness(df, chunks, rare_share, words) if rare_share > 0 else 0.0
    return QueryTerms(kept, [idf(chunks, df[t]) for t in kept], avgdl, exact)
