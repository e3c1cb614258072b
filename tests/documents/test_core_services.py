"""Services against a real PostgreSQL + pgvector: sources, ingestion, search, update, delete."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from services.access.scope import Scope, use_scope
from services.app import Archivist
from services.core.database import ConfigMismatch, Database
from services.core.errors import Conflict, InvalidArgument, NotFound, PermissionDenied
from tests.support.corpus import DOCUMENTS, QUERIES


@pytest.fixture(scope="module")
async def corpus(app: Archivist) -> dict[str, Any]:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        source = await app.sources.create("Corpus", description="hand-written topics")
        ids = {}
        for title, content in DOCUMENTS.items():
            result = await app.documents.create_from_text(source.id, content, title=title)
            ids[title] = result.document.id
        return {"source_id": source.id, "ids": ids}


async def test_migrations_are_recorded_and_idempotent(app: Archivist, settings: Any) -> None:
    versions = [r["version"] for r in await app.db.pool.fetch("SELECT version FROM schema_migrations ORDER BY 1")]
    assert versions[0] == "001_core"
    second = Database(settings)
    await second.start(app.embedder.name, app.embedder.dim)  # applies nothing new, no error
    await second.close()
    assert await app.db.pool.fetchval("SELECT count(*) FROM schema_migrations") == len(versions)


async def test_concurrent_starts_are_safe(app: Archivist, settings: Any) -> None:
    dbs = [Database(settings) for _ in range(3)]
    await asyncio.gather(*(db.start(app.embedder.name, app.embedder.dim) for db in dbs))
    for db in dbs:
        await db.close()


async def test_other_model_on_existing_database_is_refused(app: Archivist, settings: Any) -> None:
    other = Database(settings)
    with pytest.raises(ConfigMismatch) as info:
        await other.start("onnx:some-other-model", 768)
    assert "archivist reembed" in info.value.suggestion
    assert app.embedder.name in info.value.message


@pytest.mark.usefixtures("owner")
async def test_ingest_chunks_cover_content_and_offsets_match(app: Archivist, corpus: dict) -> None:
    doc_id = corpus["ids"]["Postgres vacuum"]
    document = await app.documents.get(doc_id)
    assert document.chunk_count >= 1
    content = await app.db.pool.fetchval("SELECT content FROM documents WHERE id = $1", doc_id)
    rows = await app.db.pool.fetch(
        "SELECT text, char_start, char_end, heading_path FROM chunks WHERE document_id = $1 ORDER BY chunk_index",
        doc_id,
    )
    assert len(rows) == document.chunk_count
    for row in rows:
        assert content[row["char_start"] : row["char_end"]] == row["text"]
    assert any("Autovacuum" in r["heading_path"] for r in rows) or len(rows) == 1


async def test_same_content_is_reported_unchanged(app: Archivist, corpus: dict) -> None:
    again = await app.documents.create_from_text(corpus["source_id"], DOCUMENTS["Roman aqueducts"], title="Copy")
    assert again.status == "unchanged"
    assert again.document.id == corpus["ids"]["Roman aqueducts"]
    count = await app.db.pool.fetchval("SELECT count(*) FROM documents WHERE source_id = $1", corpus["source_id"])
    assert count == len(DOCUMENTS)


@pytest.mark.parametrize("search_type", ["vector", "hybrid", "rerank"])
@pytest.mark.usefixtures("owner")
async def test_right_document_ranks_first(app: Archivist, corpus: dict, search_type: str) -> None:
    for query, expected in QUERIES:
        outcome = await app.search.search(query, corpus["source_id"], 5, search_type)
        assert outcome.hits, query
        assert outcome.hits[0].document_title == expected, (
            search_type,
            query,
            outcome.hits[0].document_title,
        )
        scores = [h.score for h in outcome.hits]
        assert scores == sorted(scores, reverse=True)
        assert all(0.0 <= s <= 1.0 for s in scores)


@pytest.mark.usefixtures("owner")
async def test_keyword_leg_finds_rare_exact_term(app: Archivist, corpus: dict) -> None:
    outcome = await app.search.search("autovacuum_vacuum_scale_factor", corpus["source_id"], 3, "hybrid")
    assert outcome.hits[0].document_title == "Postgres vacuum"
    assert outcome.hits[0].match_type in ("hybrid", "keyword")


@pytest.mark.usefixtures("owner")
async def test_source_filter_still_returns_k(app: Archivist, corpus: dict) -> None:
    other = await app.sources.create("Noise")
    for i in range(30):
        await app.documents.create_from_text(other.id, f"Noise document number {i} about baking bread and flour.")
    outcome = await app.search.search("flour", corpus["source_id"], 5, "vector")
    assert len(outcome.hits) == len(DOCUMENTS)  # all five corpus documents, none from Noise
    assert {h.source_id for h in outcome.hits} == {corpus["source_id"]}
    many = await app.search.search("bread", other.id, 20, "vector")
    assert len(many.hits) == 20


@pytest.mark.usefixtures("owner")
async def test_threshold_and_capping(app: Archivist, corpus: dict) -> None:
    loose = await app.search.search("honeybee dance", corpus["source_id"], 50, "hybrid")
    assert loose.capped and loose.match_count == 20
    strict = await app.search.search("honeybee dance", corpus["source_id"], 10, "hybrid", similarity_threshold=0.4)
    assert strict.hits and all(h.similarity >= 0.4 for h in strict.hits)
    assert len(strict.hits) < len(loose.hits)
    with pytest.raises(InvalidArgument):
        await app.search.search("x", None, 5, "hybrid", similarity_threshold=1.5)
    with pytest.raises(InvalidArgument):
        await app.search.search("x", None, 5, "semantic")
    with pytest.raises(NotFound):
        await app.search.search("x", "00000000-0000-0000-0000-000000000000", 5, "hybrid")


@pytest.mark.usefixtures("owner")
async def test_update_content_replaces_search_results(app: Archivist) -> None:
    source = await app.sources.create("Updates")
    created = await app.documents.create_from_text(
        source.id, "The capital of Atlantis is Poseidonia.", title="Atlantis"
    )
    updated = await app.documents.update(
        created.document.id, content="Zebras graze on the savanna grasslands of Tanzania."
    )
    assert updated.status == "updated" and updated.chunks_created == 1
    hits = (await app.search.search("zebras savanna", source.id, 5, "hybrid")).hits
    assert hits and "Zebras" in hits[0].text
    old = (await app.search.search("Poseidonia", source.id, 5, "hybrid")).hits
    assert all("Poseidonia" not in h.text for h in old)


@pytest.mark.usefixtures("owner")
async def test_update_is_atomic_for_readers(app: Archivist) -> None:
    """Concurrent readers see the old or the new chunks, never none."""
    source = await app.sources.create("Atomic")
    doc = await app.documents.create_from_text(source.id, "Version one of the text about lighthouses.", title="L")
    seen_empty = False

    async def reader() -> None:
        nonlocal seen_empty
        for _ in range(60):
            n = await app.db.pool.fetchval("SELECT count(*) FROM chunks WHERE document_id = $1", doc.document.id)
            seen_empty = seen_empty or n == 0
            await asyncio.sleep(0)

    async def writer() -> None:
        for i in range(5):
            await app.documents.update(doc.document.id, content=f"Version {i + 2} of the text about lighthouses.")

    await asyncio.gather(reader(), writer())
    assert not seen_empty


@pytest.mark.usefixtures("owner")
async def test_update_metadata_merges_and_url_conflict(app: Archivist) -> None:
    source = await app.sources.create("Meta")
    a = await app.documents.create_from_text(source.id, "alpha text", url="https://a.example/1", metadata={"x": 1})
    b = await app.documents.create_from_text(source.id, "beta text", url="https://a.example/2")
    merged = await app.documents.update(a.document.id, metadata={"y": 2})
    assert merged.document.metadata == {"x": 1, "y": 2} and merged.chunks_created == 0
    with pytest.raises(Conflict):
        await app.documents.update(b.document.id, url="https://a.example/1")


@pytest.mark.usefixtures("owner")
async def test_read_window_and_chunk(app: Archivist) -> None:
    source = await app.sources.create("Long")
    content = "".join(f"Sentence number {i} is here. " for i in range(300))
    doc = await app.documents.create_from_text(source.id, content, title="Long one")
    first = await app.documents.read_window(doc.document.id, 0)
    assert first.text == content[:1000] and first.next_offset == 1000
    last = await app.documents.read_window(doc.document.id, len(content) - 10)
    assert last.text == content[-10:] and last.next_offset is None
    chunk = await app.documents.get_chunk(doc.document.id, 1)
    assert content[chunk.char_start : chunk.char_end] == chunk.text
    with pytest.raises(InvalidArgument):
        await app.documents.get_chunk(doc.document.id, 999)
    with pytest.raises(InvalidArgument):
        await app.documents.read_window(doc.document.id, len(content) + 5)


@pytest.mark.usefixtures("owner")
async def test_files_and_directories(app: Archivist, files_dir: Path) -> None:
    source = await app.sources.create("Files")
    (files_dir / "notes.md").write_text("# Gardening\n\nTomatoes need full sun and regular watering.")
    tree = files_dir / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.md").write_text("# Alpha\n\nAlpha document about comets.")
    (tree / "sub" / "b.py").write_text("def orbit():\n    '''Compute a comet orbit.'''\n    return 42\n")
    (tree / "bad.json").write_text("{not json")
    (tree / "skip.bin").write_bytes(b"\x00\x01")
    one = await app.documents.create_from_file(source.id, files_dir / "notes.md")
    assert one.status == "created" and one.document.title == "Gardening"
    results, failures, skipped = await app.documents.create_from_directory(source.id, tree)
    assert sorted(p.name for p, _ in results) == ["a.md", "b.py"]
    assert [Path(f.path).name for f in failures] == ["bad.json"] and skipped == 0
    only_md, _, _ = await app.documents.create_from_directory(source.id, tree, [".md"])
    assert [p.name for p, _ in only_md] == ["a.md"] and only_md[0][1].status == "unchanged"


@pytest.mark.usefixtures("owner")
async def test_paths_outside_allowed_roots_are_refused(app: Archivist, files_dir: Path, tmp_path: Path) -> None:
    source = await app.sources.create("Guarded")
    outside = tmp_path / "secret.txt"
    outside.write_text("top secret")
    with pytest.raises(PermissionDenied):
        await app.documents.create_from_file(source.id, outside)
    with pytest.raises(PermissionDenied):
        await app.documents.create_from_file(source.id, files_dir / ".." / outside.parent.name / "secret.txt")
    link = files_dir / "link.txt"
    link.symlink_to(outside)
    with pytest.raises(PermissionDenied):
        await app.documents.create_from_file(source.id, link)


@pytest.mark.usefixtures("owner")
async def test_file_size_limit(app: Archivist, files_dir: Path, settings: Any) -> None:
    source = await app.sources.create("Big")
    big = files_dir / "big.txt"
    big.write_text("x" * (settings.max_file_bytes + 1))
    with pytest.raises(InvalidArgument, match="limit"):
        await app.documents.create_from_file(source.id, big)


@pytest.mark.usefixtures("owner")
async def test_delete_cascades(app: Archivist) -> None:
    source = await app.sources.create("Doomed")
    doc = await app.documents.create_from_text(source.id, "Something to delete. " * 200)
    chunks = doc.document.chunk_count
    await app.documents.create_from_text(source.id, "Another document to delete.")
    removed = await app.documents.delete(doc.document.id)
    assert removed["chunks_deleted"] == chunks
    gone = await app.sources.delete(source.id)
    assert gone["documents_deleted"] == 1 and gone["chunks_deleted"] == 1
    left = await app.db.pool.fetchval("SELECT count(*) FROM chunks WHERE source_id = $1", source.id)
    assert left == 0
    with pytest.raises(NotFound):
        await app.sources.get(source.id)


@pytest.mark.usefixtures("owner")
async def test_list_pagination(app: Archivist) -> None:
    source = await app.sources.create("Paged")
    for i in range(25):
        await app.documents.create_from_text(source.id, f"Paged document {i} about topic {i * 7}.")
    first = await app.documents.list(source.id, 1, 20)
    second = await app.documents.list(source.id, 2, 20)
    assert first.total_count == 25 and len(first.items) == 20 and first.has_more
    assert len(second.items) == 5 and not second.has_more
    assert not {d.id for d in first.items} & {d.id for d in second.items}
    with pytest.raises(InvalidArgument):
        await app.documents.list(source.id, 1, 21)


async def test_stats(app: Archivist, corpus: dict) -> None:
    stats = await app.sources.stats(corpus["source_id"])
    assert stats.documents_count == len(DOCUMENTS)
    chunks = await app.db.pool.fetchval("SELECT count(*) FROM chunks WHERE source_id = $1", corpus["source_id"])
    assert stats.chunks_count == chunks and stats.last_updated is not None


@pytest.mark.usefixtures("owner")
async def test_same_content_ingested_concurrently_is_stored_once(app: Archivist) -> None:
    source = await app.sources.create("Concurrent duplicates")
    text = "Identical content arriving from two URLs at the same moment."
    results = await asyncio.gather(
        *(app.documents.create_from_text(source.id, text, url=f"https://mirror{i}.example/page") for i in range(4))
    )
    assert sorted(r.status for r in results) == ["created", "unchanged", "unchanged", "unchanged"]
    assert len({r.document.id for r in results}) == 1
    count = await app.db.pool.fetchval("SELECT count(*) FROM documents WHERE source_id = $1", source.id)
    assert count == 1
