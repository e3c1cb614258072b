"""Ranking chunks that have no vector yet (two-phase indexing), inside the hybrid query.

A pending chunk is invisible to the vector leg, so its keyword evidence has to carry the meaning a
vector would. The keyword leg of a fully-embedded search leaves out query terms found in more than
`keyword_max_term_frequency` of chunks (5 %): beside a vector they add little. Alone they are most of
the evidence: "match text with a regular expression" keeps only "match" at that limit, and on the
docs benchmark with nothing embedded page-level hit@5 was 0.74-0.83 (PostgreSQL) and 0.82 (Django),
against 0.97 and 0.95 with every term (docs/performance.md).

So when the searched scope has pending chunks (BM25 ranking), the hybrid query gets a second keyword
leg, `kwp`: BM25 over pending chunks only, with the query's terms up to
`keyword_pending_max_term_frequency` (all by default). A small backlog (up to `PENDING_SCAN_MAX`
chunks in scope) is scored exactly, starting from its chunks; a larger one from each term's postings
(the first `bm25_postings_per_term` pending ones by impact), checking each posting's chunk is pending:
in a large corpus with a large backlog that walk can grow long for very common terms.

Embedded chunks rank exactly as before (vector leg + the usual keyword leg); a pending chunk's score
comes from its every-term BM25 alone, for both shares of the fusion, set against every candidate's
(embedded ones too): convex, that score over the best candidate's; RRF, its rank among them. (Set
against the pending chunks' best alone, a few pending chunks in an embedded source took the top
places: Django MRR@10 0.89 -> 0.72 with 5 of 2,475 chunks pending.) With no pending chunk in scope
none of this is in the SQL.
"""

from __future__ import annotations

from services.search.bm25 import EXACT_SCORE, POSTING_SCORE, exact_terms

#: Pending chunks only: a posting counts when its chunk has no vector (primary-key lookups).
PENDING_FILTER = (
    "EXISTS (SELECT 1 FROM chunk_seqs ps JOIN chunks pc ON pc.id = ps.chunk_id"
    " WHERE ps.seq = p.seq AND pc.embedding IS NULL)"
)
EXACT = exact_terms("s.seq = cand.seq", "{terms}", "{idfs}")

# The pending leg, exhaustive: {terms} / {idfs} are the parameters of the pending terms and their idf;
# $2 sources, $3 depth, $10 k1, $11 b, $12 avgdl as in the keyword leg.
PENDING_BM25_LEG = f"""
kwp AS (
    SELECT id, rank AS kscore, row_number() OVER (ORDER BY rank DESC, id) AS rnk FROM (
        SELECT s.chunk_id AS id, {POSTING_SCORE} AS rank
        FROM unnest({{terms}}::text[], {{idfs}}::float8[]) AS q(term, idf)
        CROSS JOIN LATERAL (
            SELECT p.seq, p.tf FROM bm25_postings(q.term, $2::uuid[], NULL) p
            WHERE {{pending}}{{{{codeseq:p.seq}}}} OFFSET 0
        ) p
        JOIN chunk_seqs s ON s.seq = p.seq
        GROUP BY s.chunk_id ORDER BY rank DESC, s.chunk_id LIMIT $3
    ) k
)"""

# The same driven from the pending chunks (the partial index chunks_pending_idx), exact: each pending
# chunk's term frequencies read from the chunk itself. For a small backlog (at most PENDING_SCAN_MAX
# chunks in scope), whatever the size of the rest of the corpus.
PENDING_SCAN_LEG = f"""
kwp AS (
    SELECT id, rank AS kscore, row_number() OVER (ORDER BY rank DESC, id) AS rnk FROM (
        SELECT s.chunk_id AS id, {EXACT_SCORE} AS rank
        FROM (
            SELECT pc.id FROM chunks pc
            WHERE pc.embedding IS NULL AND ($2::uuid[] IS NULL OR pc.source_id = ANY($2::uuid[]))
                {{{{code:pc.id}}}} OFFSET 0
        ) cand
        {exact_terms("s.chunk_id = cand.id", "{terms}", "{idfs}")}
        GROUP BY s.chunk_id ORDER BY rank DESC, s.chunk_id LIMIT $3
    ) k
)"""
#: Pending chunks in scope up to which the pending leg starts from them rather than from the postings.
PENDING_SCAN_MAX = 5000

# The same over impact-ordered postings ($13 per term, $14 candidates), as BM25_TOPK_LEG; no impact cut
# (the pending filter drops postings after it).
PENDING_BM25_TOPK_LEG = f"""
kwp AS (
    SELECT id, rank AS kscore, row_number() OVER (ORDER BY rank DESC, id) AS rnk FROM (
        SELECT s.chunk_id AS id, {EXACT_SCORE} AS rank
        FROM (
            SELECT p.seq FROM unnest({{terms}}::text[], {{idfs}}::float8[]) AS q(term, idf)
            CROSS JOIN LATERAL (
                SELECT p.seq, p.impact FROM bm25_postings(q.term, $2::uuid[], NULL) p
                WHERE {{pending}}{{{{codeseq:p.seq}}}}
                ORDER BY p.impact DESC, p.seq LIMIT $13::integer
            ) p
            GROUP BY p.seq ORDER BY sum(q.idf * p.impact) DESC, p.seq LIMIT $14::integer
        ) cand
        {EXACT}
        GROUP BY s.chunk_id ORDER BY rank DESC, s.chunk_id LIMIT $3
    ) k
)"""

# The candidates of the three legs, and every candidate's BM25 over the pending leg's terms (read from
# the chunks, a few hundred): the one scale on which a pending chunk is set against embedded ones.
_SCORED = f"""cand AS (
    SELECT coalesce(vec.id, kw.id, kwp.id) AS id, vec.rnk AS vrank, coalesce(kw.rnk, kwp.rnk) AS krank,
           vec.dist, kw.kscore
    FROM vec FULL OUTER JOIN kw ON vec.id = kw.id FULL OUTER JOIN kwp ON kwp.id = coalesce(vec.id, kw.id)
),
every AS (
    SELECT s.chunk_id AS id, {EXACT_SCORE} AS es
    FROM cand {exact_terms("s.chunk_id = cand.id", "{terms}", "{idfs}")}
    GROUP BY s.chunk_id
),
scored AS (
    SELECT cand.id, cand.vrank, cand.krank, coalesce(cand.kscore, 0) AS ks, coalesce(every.es, 0) AS es,
           c.embedding IS NULL AS pending, 1 - coalesce(cand.dist, c.embedding <=> $1) AS cos
    FROM cand JOIN chunks c ON c.id = cand.id LEFT JOIN every ON every.id = cand.id
)"""

# RRF: an embedded chunk as in RRF_FUSION; a pending one counts, for both legs, its rank among all
# candidates by the every-term BM25.
RRF_FUSION_PENDING_LEG = (
    _SCORED
    + """,
ranked AS (
    SELECT scored.*, CASE WHEN es > 0 THEN row_number() OVER (ORDER BY es DESC, id) END AS erank FROM scored
),
fused AS (
    SELECT id, vrank, krank,
           CASE WHEN pending THEN coalesce(($5::float8 + $6::float8) / ($7::float8 + erank), 0)
                ELSE coalesce($5::float8 / ($7::float8 + vrank), 0) + coalesce($6::float8 / ($7::float8 + krank), 0)
           END AS rrf
    FROM ranked
    ORDER BY rrf DESC, id LIMIT $8
)"""
)

# Convex: an embedded chunk as in CONVEX_FUSION (normalised over the same vector and keyword
# candidates); a pending chunk (no cosine) scores its every-term BM25 over the best candidate's.
CONVEX_FUSION_PENDING_LEG = (
    _SCORED
    + """,
fused AS (
    SELECT id, vrank, krank,
           CASE WHEN pending THEN es / greatest(max(es) OVER (), 1e-9)
                ELSE ($5::float8 * (cos - min(cos) OVER ()) / greatest(max(cos) OVER () - min(cos) OVER (), 1e-9)
                      + $6::float8 * ks / greatest(max(ks) OVER (), 1e-9)) / ($5::float8 + $6::float8)
           END AS rrf
    FROM scored WHERE $7::float8 IS NOT NULL
    ORDER BY rrf DESC, id LIMIT $8
)"""
)


def pending_fusion(convex: bool, first_param: int) -> str:
    """The fusion when chunks are pending, the pending leg's terms and idfs at `$first_param` and the next."""
    template = CONVEX_FUSION_PENDING_LEG if convex else RRF_FUSION_PENDING_LEG
    return template.replace("{terms}", f"${first_param}").replace("{idfs}", f"${first_param + 1}")


def pending_leg(pending: int, topk: bool, first_param: int) -> str:
    """The pending leg for `pending` chunks in scope, its terms and idfs at `$first_param` and the next:
    from the pending chunks when they are few, else from the postings (impact-ordered when `topk`)."""
    if pending <= PENDING_SCAN_MAX:
        template = PENDING_SCAN_LEG
    else:
        template = PENDING_BM25_TOPK_LEG if topk else PENDING_BM25_LEG
    return template.format(terms=f"${first_param}", idfs=f"${first_param + 1}", pending=PENDING_FILTER)
