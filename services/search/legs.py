"""Which keyword leg a search runs, and the code-documents filter (issue 32, point 3).

* `keyword_mode="any"` (default): the leg ORs the query's informative terms (BM25 over impact-ordered
  postings, or over every posting, or ts_rank; services/search/bm25.py, hybrid.py).
* `keyword_mode="all"`: only chunks holding every informative term (BM25_ALL_LEG; with ts_rank, an AND
  tsquery), the terms passed rarest first.
* `search_type="code"`: every leg of the query keeps chunks of code documents only. The SQL templates
  mark where with `{code:<chunk id expression>}`; `code_filter` fills or drops the marks.
"""

from __future__ import annotations

import re

from services.core.settings import Settings
from services.search.bm25 import BM25_ALL_LEG, BM25_LEG, BM25_TOPK_LEG

# $4: tsquery text (literal lexemes ORed, or ANDed for keyword_mode="all")
TS_RANK_LEG = """
kw AS (
    SELECT id, rank AS kscore, row_number() OVER (ORDER BY rank DESC, id) AS rnk FROM (
        SELECT c.id, ts_rank(c.tsv, $4::tsquery, 1) AS rank FROM chunks c
        WHERE c.tsv @@ $4::tsquery AND ($2::uuid[] IS NULL OR c.source_id = ANY($2::uuid[])){code:c.id}
        ORDER BY rank DESC, c.id LIMIT $3
    ) k
)"""

KEYWORD_MODES = ("any", "all")
HYBRID_MODES = ("weighted", "filter")
#: `{code:X}` in a query template: where a chunk id X is checked to belong to a code document.
CODE_MARK = re.compile(r"\{code:([a-z_.]+)\}")
CODE_ONLY = (
    " AND EXISTS (SELECT 1 FROM chunks fc JOIN documents fd ON fd.id = fc.document_id "
    "WHERE fc.id = {chunk} AND fd.document_type = 'code')"
)
#: `{codeseq:X}`: the same for a posting's chunk seq X (sql/042 chunk_seqs); `{cut:X}`: the impact cut a
#: posting read may use, X, or none (NULL) when the code filter drops postings after it.
CODE_SEQ_MARK = re.compile(r"\{codeseq:([a-z_.]+)\}")
CODE_SEQ_ONLY = (
    " AND EXISTS (SELECT 1 FROM chunk_seqs fs JOIN chunks fc ON fc.id = fs.chunk_id JOIN documents fd"
    " ON fd.id = fc.document_id WHERE fs.seq = {seq} AND fd.document_type = 'code')"
)
CUT_MARK = re.compile(r"\{cut:(\$[0-9]+)\}")


def code_filter(sql: str, code_only: bool) -> str:
    """The query with its code marks filled (code documents only) or dropped."""
    sql = CODE_MARK.sub(lambda m: CODE_ONLY.format(chunk=m.group(1)) if code_only else "", sql)
    sql = CODE_SEQ_MARK.sub(lambda m: CODE_SEQ_ONLY.format(seq=m.group(1)) if code_only else "", sql)
    return CUT_MARK.sub(lambda m: "NULL" if code_only else f"{m.group(1)}::integer", sql)


def uses_topk(settings: Settings, mode: str = "any") -> bool:
    """Whether the leg reads impact-ordered postings (and takes their two parameters, $13 and $14)."""
    return settings.keyword_ranking == "bm25" and bool(settings.bm25_postings_per_term) and mode != "all"


def keyword_leg(settings: Settings, mode: str = "any") -> str:
    if settings.keyword_ranking != "bm25":
        return TS_RANK_LEG
    if mode == "all":
        return BM25_ALL_LEG
    return BM25_TOPK_LEG if uses_topk(settings, mode) else BM25_LEG
