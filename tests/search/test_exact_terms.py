"""The exact term decides (issue 29, point 1): rare names and marker words, real embeddings, real PostgreSQL.

* A query that is a rare word ranks the chunk holding it first, over a short generic chunk the vector
  leg prefers (query-aware fusion: the keyword weight rises with the share of the query's idf carried
  by rare terms).
* Dotted, namespaced and snake_case names are searchable whole and by part, in the keyword leg, in
  hybrid, and while the chunks wait for their vectors (the pending path).
* An existing database is re-analysed by the migration (an upgrade keeps identifiers findable).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from services.access.scope import Scope, use_scope
from services.app import Archivist
from tests.conftest import fresh_database, make_settings

SECTIONS = [
    ("Lanterns", "Trim the wick before lighting, and keep the glass chimney clean of soot."),
    ("Tides", "Spring tides follow the full and new moon; neap tides fall between them."),
    ("Knots", "A bowline makes a fixed loop that neither slips nor jams under load."),
    ("Charts", "Soundings on a chart are given at the lowest astronomical tide."),
    ("Weather", "A falling barometer and a backing wind warn of an approaching depression."),
]

GUIDE = "# Keeper guide\n\nIntro.\n\n" + "\n\n".join(
    f"## {title}\n\n{(text + ' ') * 6}The marker of this section is quillfeather{n}."
    for n, (title, text) in enumerate(SECTIONS, start=1)
)

CODE_NOTES = {
    "Patching": "Use mock.patch.object(Target, 'method') to replace one attribute for the test's duration; "
    "the original comes back afterwards.",
    "Copying trees": "shutil.copytree(src, dst, dirs_exist_ok=True) copies into a folder that may exist.",
    "Async runtime": "Start a task on the runtime with tokio::spawn and await its JoinHandle for the result.",
    "Counting": "collections.Counter.most_common(n) lists the n most frequent elements first.",
    "Unrelated": "Lighthouse keepers patch the roof, copy the logbook and count the ships that pass by.",
}


async def _source(app: Archivist, title: str) -> Any:
    return await app.sources.create(title=title)


@pytest.fixture(scope="module")
async def guide(app: Archivist) -> Any:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        source = await _source(app, "Guide")
        await app.documents.create_from_text(source.id, GUIDE, "Keeper guide")
        return source


@pytest.fixture(scope="module")
async def notes(app: Archivist) -> Any:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        source = await _source(app, "Code notes")
        for title, text in CODE_NOTES.items():
            await app.documents.create_from_text(source.id, text, title)
        return source


@pytest.mark.usefixtures("owner")
async def test_a_marker_word_ranks_its_chunk_first(app: Archivist, guide: Any) -> None:
    chunks = await app.db.pool.fetch("SELECT text FROM chunks WHERE source_id = $1", guide.id)
    assert any(c["text"].strip().endswith("Intro.") for c in chunks) or len(chunks) > 3, chunks
    for n in range(1, len(SECTIONS) + 1):
        outcome = await app.search.search(f"quillfeather{n}", guide.id, 5, "hybrid")
        assert f"quillfeather{n}" in outcome.hits[0].text, (n, [h.text[:40] for h in outcome.hits])


@pytest.mark.usefixtures("owner")
@pytest.mark.parametrize(
    ("query", "title"),
    [
        ("mock.patch.object", "Patching"),
        ("patch.object", "Patching"),
        ("dirs_exist_ok", "Copying trees"),
        ("tokio::spawn", "Async runtime"),
        ("Counter.most_common", "Counting"),
        ("most_common", "Counting"),
    ],
)
@pytest.mark.parametrize("search_type", ["keyword", "hybrid"])
async def test_names_are_found_whole_and_by_part(
    app: Archivist, notes: Any, query: str, title: str, search_type: str
) -> None:
    outcome = await app.search.search(query, notes.id, 5, search_type)
    assert outcome.hits and outcome.hits[0].document_title == title, [h.document_title for h in outcome.hits]


#: Text around the test sql/044 runs before extracting names: each must get the names the extractor finds.
NAME_BODIES = [
    "Use mock.patch.object(Target) here.",
    "tokio::spawn a task",
    "dirs_exist_ok=True",
    "__init__ and _private",
    "v1.x and café.menu and Ωmega::Δelta",
    "a_1 b__2 x_",
    "e.g. this, i.e. that",
    "End of a sentence. Next one: and a colon. 1.5 and 3.14 and ::leading and .hidden",
    "plain prose with no name at all",
    "",
]


@pytest.mark.parametrize("body", NAME_BODIES)
async def test_chunk_names_skip_only_text_without_a_name(app: Archivist, body: str) -> None:
    """archivist_chunk_names (sql/044) runs the extractor only on text that can hold a name: the same
    names as the extractor on every text, the faster way."""
    got, want = await app.db.pool.fetchrow(
        "SELECT archivist_chunk_names($1)::text, archivist_name_terms($2::regconfig, $1)::text",
        body,
        app.db.fts_config,
    )
    assert got == want


def test_exactness_is_the_idf_share_of_rare_terms() -> None:
    from services.search.bm25 import exactness, idf

    chunks = 1000.0
    assert exactness({"quillfeather4": 1}, chunks, 0.001) == 1.0
    assert exactness({"tide": 300, "moon": 200}, chunks, 0.001) == 0.0
    mixed = exactness({"quillfeather4": 1, "tide": 300}, chunks, 0.001)
    assert mixed == pytest.approx(idf(chunks, 1) / (idf(chunks, 1) + idf(chunks, 300)))
    assert exactness({"absent": 0}, chunks, 0.001) == 0.0
    # a name is one word, as rare as its whole form: its common parts do not dilute it
    df = {"pg_stat_statements": 1, "pg": 400, "stat": 50, "statement": 300, "enable": 200}
    words = {"pg_stat_statements": [2], "pg": [2], "stat": [2], "statement": [2], "enable": [1]}
    both = exactness(df, chunks, 0.001, words)
    assert both == pytest.approx(idf(chunks, 1) / (idf(chunks, 1) + idf(chunks, 200)))


@pytest.mark.usefixtures("owner")
async def test_names_are_found_while_chunks_wait_for_vectors(database_url: str, tmp_path: Path, embedder: Any) -> None:
    """The pending path (two-phase indexing): chunks stored, no vector yet, found by their names."""
    settings = make_settings(database_url, tmp_path, run_worker=False)
    app = await Archivist.open(settings, embedder)
    try:
        source = await _source(app, "Pending notes")
        for title, text in CODE_NOTES.items():
            await app.documents.ingest(source.id, title, text, "markdown", embed=False)
        assert await app.search.pending_embeddings([source.id]) > 0
        for query, title in [("patch.object", "Patching"), ("dirs_exist_ok", "Copying trees")]:
            outcome = await app.search.search(query, source.id, 5, "hybrid")
            assert outcome.hits[0].document_title == title, (query, [h.document_title for h in outcome.hits])
    finally:
        await app.close()


POSTINGS = "SELECT bm25_df($1)"
OLD_POSTINGS = "SELECT count(*) FROM chunk_terms WHERE term = $1"


@pytest.fixture
async def own_database(pg_server: Any) -> AsyncIterator[str]:
    """A database of its own (the test rewinds a migration)."""
    async with fresh_database(pg_server) as url:
        yield url


@pytest.mark.usefixtures("owner")
async def test_an_upgraded_database_finds_names_by_part(own_database: str, tmp_path: Path, embedder: Any) -> None:
    """A database indexed before sql/030 (plain to_tsvector, one row per posting in chunk_terms) is
    re-analysed and converted to compact postings (sql/042) when the server starts."""
    settings = make_settings(own_database, tmp_path)
    app = await Archivist.open(settings, embedder)
    try:
        source = await _source(app, "Old notes")
        for title, text in CODE_NOTES.items():
            await app.documents.create_from_text(source.id, text, title)
        async with app.db.pool.acquire() as conn:  # back to the postings before the migrations: plain tsv
            await conn.execute(
                "CREATE TABLE chunk_terms (term text, chunk_id uuid, source_id uuid, tf integer, dl integer, "
                "impact real, PRIMARY KEY (term, chunk_id))"
            )
            await conn.execute("TRUNCATE chunk_seqs, term_blocks, term_delta, term_dead, bm25_totals")
            await conn.execute(
                "INSERT INTO bm25_totals (chunks, length) SELECT count(*), sum(tsvector_length(tsv)) FROM chunks"
            )
            await conn.execute(
                "INSERT INTO chunk_terms (term, chunk_id, source_id, tf, dl, impact) "
                "SELECT u.lexeme, c.id, c.source_id, coalesce(array_length(u.positions, 1), 1), "
                "tsvector_length(c.tsv), 1 FROM chunks c, unnest(c.tsv) u"
            )
            await conn.execute(
                "DELETE FROM schema_migrations WHERE version = ANY($1::text[])",
                ["030_identifier_terms", "042_compact_postings", "044_faster_postings_build"],
            )
        assert await app.db.pool.fetchval(OLD_POSTINGS, "patch.object") == 0
    finally:
        await app.close()
    app = await Archivist.open(settings, embedder)  # the migration runs again
    try:
        assert await app.db.pool.fetchval(POSTINGS, "patch.object") == 1
        assert await app.db.pool.fetchval("SELECT to_regclass('chunk_terms')") is None
        after = await app.search.search("patch.object", source.id, 5, "keyword")
        assert after.hits and after.hits[0].document_title == "Patching"
    finally:
        await app.close()
