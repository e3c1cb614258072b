"""The term statistics of a search read in one round trip, faster, with the same answer (issue 37, latency).

services/search/bm25.py's TERM_STATS_SQL analyses each query word once (it ran again for every term) and
skips the name search where a word can hold no name (sql/045 archivist_query_tsvector); the corpus size
moved into the query (it was a round trip of its own). Everything a search ranks by comes from these
rows, so equal rows mean the same hits: the rows are compared with the query as it was before, on a
corpus of prose and code names, for questions, names, odd punctuation and both df paths (counted and
estimated), at several caps.
"""

from __future__ import annotations

import random

import pytest

from services.app import Archivist
from services.search.base import QUERY_LEXEMES_SQL
from services.search.bm25 import TERM_STATS_SQL, query_terms

#: TERM_STATS_SQL before the change (the reference): words inlined, archivist_tsvector everywhere,
#: the cap ($2) computed by the caller from a separate read of bm25_totals.
BEFORE_SQL = """
WITH tot AS (SELECT coalesce(sum(chunks), 0)::float8 AS n, coalesce(sum(length), 0)::float8 AS len FROM bm25_totals),
terms AS (SELECT DISTINCT unnest(tsvector_to_array(archivist_tsvector('{fts_config}'::regconfig, $1))) AS term),
words AS (
    SELECT x.i, unnest(tsvector_to_array(archivist_tsvector('{fts_config}'::regconfig, x.w))) AS term
    FROM regexp_split_to_table($1, '[[:space:]]+') WITH ORDINALITY AS x(w, i)
)
SELECT terms.term, tot.n, tot.len,
       CASE WHEN terms.term = ANY($3::text[]) THEN NULL
            ELSE least(bm25_df(terms.term), $2::bigint) END AS df,
       ARRAY(SELECT words.i FROM words WHERE words.term = terms.term) AS words
FROM terms, tot
ORDER BY terms.term
"""

NOTES = {
    "Kilns": "Firing a pottery kiln: the kiln reaches cone six. Glaze the pottery before the second kiln firing.",
    "Glazes": "Glaze recipes: a celadon glaze needs iron oxide; test every glaze on a tile, twice.",
    "Patching": "Use mock.patch.object(Target, 'method') to replace one attribute for the test's duration.",
    "Copying": "shutil.copytree(src, dst, dirs_exist_ok=True) copies into a folder that may exist.",
    "Runtime": "Start a task with tokio::spawn and await its JoinHandle; std::fs::read_to_string reads a file.",
    "Garden": "Tomato plants need sun, water and staking; pinch the suckers weekly. 1 in 5 plants wilt.",
}

QUERIES = [
    "how hot does a pottery kiln get",
    "kiln",
    "glaze glaze GLAZE recipes",
    "mock.patch.object",
    "patch.object replace attribute",
    "dirs_exist_ok copytree",
    "tokio::spawn JoinHandle",
    "std::fs::read_to_string",
    "a: b. c_ d::",
    "1 in 5 million in UK have abnormal PrP positivity.",
    "  spaced\tout\nquery  ",
    "the of and",
    "naïve café résumé",
    "Path.read_text() vs open(...).read()",
    "...",
    "zzzz unknownword",
]


async def _rows(app: Archivist, sql: str, query: str, cap: object, estimated: list[str]) -> list[dict]:
    rows = await app.db.pool.fetch(sql.format(fts_config=app.db.fts_config), query, cap, estimated)
    return [dict(r) for r in rows]


@pytest.mark.usefixtures("owner")
async def test_term_statistics_rows_equal_the_query_before(app: Archivist) -> None:
    source = await app.sources.create("Term statistics")
    for title, text in NOTES.items():
        await app.documents.create_from_text(source.id, text, title=title, url=f"mem:{title}")
    total = float(await app.db.pool.fetchval("SELECT coalesce(sum(chunks), 0) FROM bm25_totals"))
    assert total >= len(NOTES)
    for query in QUERIES:
        for share in (1.0, 0.5, 0.3, 0.05):
            for estimated in ([], ["kiln", "glaze", "mock"]):
                before = await _rows(app, BEFORE_SQL, query, int(total * share) + 1, estimated)
                after = await _rows(app, TERM_STATS_SQL, query, share, estimated)
                assert after == before, (query, share, estimated)
        # the query's lexemes as a search reports them: archivist_tsvector's, in the same order
        lexemes = await app.db.pool.fetchval(QUERY_LEXEMES_SQL.format(fts_config=app.db.fts_config), query)
        reference = await app.db.pool.fetchval(
            "SELECT tsvector_to_array(archivist_tsvector($2::regconfig, $1))", query, app.db.fts_config
        )
        assert lexemes == reference, query
    terms = await query_terms(app.db, "mock.patch.object kiln glaze", 1.0)
    assert {"mock.patch.object", "kiln", "glaze"} <= set(terms.terms) and len(terms.idfs) == len(terms.terms)


#: Words that end a sentence or hold a stray separator, but no name: no name search (sql/050).
NO_NAME = ["positivity.", "1 in 5 million.", "a: b. c_ d::", "x. y", "end:", "__init", "3.14", "_:", "a::1"]
#: Texts with a name somewhere: the name search runs.
NAMES = ["mock.patch.object", "U.S.", "e.g. 5", "tokio::spawn", "dirs_exist_ok", "a_b", "_.x", "x1.y", "9_9", "os.path"]


@pytest.mark.usefixtures("owner")
async def test_query_lexemes_skip_the_name_search_only_where_no_name_can_be(app: Archivist) -> None:
    """archivist_query_tsvector equals archivist_tsvector on every text (random texts over letters,
    digits, separators and spaces), and skips the name search for sentence punctuation (sql/050)."""
    pool, cfg = app.db.pool, app.db.fts_config
    may = "SELECT archivist_may_hold_name(t) FROM unnest($1::text[]) t"
    assert [r[0] for r in await pool.fetch(may, NO_NAME)] == [False] * len(NO_NAME)
    assert [r[0] for r in await pool.fetch(may, NAMES)] == [True] * len(NAMES)
    rng = random.Random(37)
    alphabet = ["a", "Zé", "7", "_", "__", ".", "::", ":", " ", "x.y", "getattr", "1_2", "ß"]
    texts = NO_NAME + NAMES + ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(3000)]
    differ = await pool.fetch(
        "SELECT t FROM unnest($1::text[]) t"
        " WHERE archivist_query_tsvector($2::regconfig, t) IS DISTINCT FROM archivist_tsvector($2::regconfig, t)",
        texts,
        cfg,
    )
    assert differ == []
