"""BM25 keyword ranking inside PostgreSQL, over the compact postings of sql/042_compact_postings.sql.

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

#: Query lexemes with their document frequency (at most the cap, floor(N x `$2`) + 1, the share of chunks
#: past which a term is left out; NULL for the lexemes in `$3`, whose df the statistics estimate), the
#: corpus totals, and the query words (split at white space, numbered from 1) each lexeme comes from.
#: bm25_df sums the term's block lengths and delta rows (sql/042). One round trip; the words are analysed
#: once (MATERIALIZED: inlined, the word analysis ran again for every term, most of this query's time),
#: and archivist_query_tsvector (sql/045, 050) skips the name search where a word can hold no name.
TERM_STATS_SQL = """
WITH tot AS (SELECT coalesce(sum(chunks), 0)::float8 AS n, coalesce(sum(length), 0)::float8 AS len FROM bm25_totals),
terms AS (SELECT DISTINCT unnest(tsvector_to_array(archivist_query_tsvector('{fts_config}'::regconfig, $1))) AS term),
words AS MATERIALIZED (
    SELECT x.i, unnest(tsvector_to_array(archivist_query_tsvector('{fts_config}'::regconfig, x.w))) AS term
    FROM regexp_split_to_table($1, '[[:space:]]+') WITH ORDINALITY AS x(w, i)
)
SELECT terms.term, tot.n, tot.len,
       CASE WHEN terms.term = ANY($3::text[]) THEN NULL  -- estimated from the statistics: not counted
            ELSE least(bm25_df(terms.term), floor(tot.n * $2::float8)::bigint + 1) END AS df,
       ARRAY(SELECT words.i FROM words WHERE words.term = terms.term) AS words
FROM terms, tot
ORDER BY terms.term
"""
EXACT_DF_SQL = "SELECT bm25_df($1)"
MIN_TERMS = 2

#: A chunk's BM25 over the query terms: from postings (`p.tf`) or from the chunk itself (`f.tf`); s is
#: its chunk_seqs row (dl). $10 k1, $11 b, $12 avgdl.
SCORE = (
    "sum(q.idf * {tf} * ($10::float8 + 1)"
    " / ({tf} + $10::float8 * (1 - $11::float8 + $11::float8 * s.dl / $12::float8)))"
)
POSTING_SCORE = SCORE.format(tf="p.tf")
EXACT_SCORE = SCORE.format(tf="f.tf")


def exact_terms(chunk: str, terms: str = "$4", idfs: str = "$9") -> str:
    """Joins giving each query term's tf in a chunk (`f`, with its idf `q`), read from the chunk's own
    tsv and names (sql/042 bm25_tfs): `chunk` is the join condition on chunk_seqs `s`."""
    return (
        f"JOIN chunk_seqs s ON {chunk} JOIN chunks fc ON fc.id = s.chunk_id\n"
        f"        CROSS JOIN LATERAL bm25_tfs(fc.tsv, s.names, {terms}::text[]) f\n"
        f"        JOIN unnest({terms}::text[], {idfs}::float8[]) AS q(term, idf) ON q.term = f.term"
    )


# Every leg cuts at $3 with ties by chunk id (chunks of equal text score alike to the last bit): which of
# them make the cut is then the same whatever plan runs the leg, alone or inside the hybrid statement
# (services/search/parallel.py); cut in sort order, the heap sort chose among them by arrival.
# The keyword leg of the hybrid query: $3 depth, $4 terms, $9 idfs, $10 k1, $11 b, $12 avgdl. Every
# live posting of each term (bm25_postings with no cut), scored from its tf and its chunk's dl.
BM25_LEG = f"""
kw AS (
    SELECT id, rank AS kscore, row_number() OVER (ORDER BY rank DESC, id) AS rnk FROM (
        SELECT s.chunk_id AS id, {POSTING_SCORE} AS rank
        FROM unnest($4::text[], $9::float8[]) AS q(term, idf)
        CROSS JOIN LATERAL (  -- OFFSET 0: per term, never a hash join over all blocks
            SELECT p.seq, p.tf FROM bm25_postings(q.term, $2::uuid[], NULL) p WHERE true{{codeseq:p.seq}} OFFSET 0
        ) p
        JOIN chunk_seqs s ON s.seq = p.seq
        GROUP BY s.chunk_id ORDER BY rank DESC, s.chunk_id LIMIT $3
    ) k
)"""


# The same leg over impact-ordered blocks (sql/042): each term's $13 highest-impact postings (ties by
# seq; only the blocks above the term's theta are read), the $14 chunks with the largest
# sum(idf * impact) as candidates, and exact BM25 for those candidates only. `{cut:$13}` is the cut
# bm25_postings may use (none when a code filter drops postings after it).
BM25_TOPK_LEG = f"""
kw AS (
    SELECT id, rank AS kscore, row_number() OVER (ORDER BY rank DESC, id) AS rnk FROM (
        SELECT s.chunk_id AS id, {EXACT_SCORE} AS rank
        FROM (
            SELECT p.seq FROM unnest($4::text[], $9::float8[]) AS q(term, idf)
            CROSS JOIN LATERAL (
                SELECT p.seq, p.impact FROM bm25_postings(q.term, $2::uuid[], {{cut:$13}}) p WHERE true{{codeseq:p.seq}}
                ORDER BY p.impact DESC, p.seq LIMIT $13::integer
            ) p
            GROUP BY p.seq ORDER BY sum(q.idf * p.impact) DESC, p.seq LIMIT $14::integer
        ) cand
        {exact_terms("s.seq = cand.seq")}
        GROUP BY s.chunk_id ORDER BY rank DESC, s.chunk_id LIMIT $3
    ) k
)"""


# keyword_mode="all": only chunks holding every term, exact: the chunks in every term's postings,
# scored from the postings' tf (each chunk's idfs and tfs gathered while intersecting).
BM25_ALL_LEG = f"""
kw AS (
    SELECT id, rank AS kscore, row_number() OVER (ORDER BY rank DESC, id) AS rnk FROM (
        SELECT s.chunk_id AS id, {SCORE.format(tf="q.tf")} AS rank
        FROM (
            SELECT p.seq, array_agg(q.idf) AS idfs, array_agg(p.tf) AS tfs
            FROM unnest($4::text[], $9::float8[]) AS q(term, idf)
            CROSS JOIN LATERAL (SELECT p.seq, p.tf FROM bm25_postings(q.term, $2::uuid[], NULL) p OFFSET 0) p
            GROUP BY p.seq HAVING count(*) = cardinality($4::text[])
        ) every
        JOIN chunk_seqs s ON s.seq = every.seq
        CROSS JOIN LATERAL unnest(every.idfs, every.tfs) AS q(idf, tf)
        WHERE true{{codeseq:every.seq}}
        GROUP BY s.chunk_id ORDER BY rank DESC, s.chunk_id LIMIT $3
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
    rows = await db.pool.fetch(
        TERM_STATS_SQL.format(fts_config=db.fts_config), text, float(max_frequency), list(estimates)
    )
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
