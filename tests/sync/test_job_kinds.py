"""Jobs of three kinds: a crawl's, a folder sync's and a git sync's parameters are their own models,
discriminated on `kind`; rows queued before that (every job's parameters a CrawlParams, a folder a
file:// URL) still load; one service call refreshes a source by its kind."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from models.jobs import CrawlParams, CrawlRequest, FolderSyncParams, GitSyncParams, Job, SyncRequest
from services.app import Archivist
from services.core.errors import InvalidArgument
from tests.conftest import make_settings

#: what a sync job's `params` were before the kinds had their own (a folder as a file:// URL)
OLD_FOLDER = {
    "url": "file:///srv/my%20notes",
    "recursive": False,
    "max_depth": 2,
    "max_pages": 20,
    "include_patterns": ["*.md"],
    "exclude_patterns": [],
    "scope": "same-host",
    "headers": {},
    "cookies": {},
    "auth_hosts": [],
}
OLD_GIT = {**OLD_FOLDER, "url": "https://git.example/org/repo.git", "include_patterns": [], "exclude_patterns": ["a/*"]}
OLD_CRAWL = {**OLD_FOLDER, "url": "https://docs.example/", "recursive": True, "max_pages": 7}


@pytest_asyncio.fixture(scope="module")
async def app(database_url: str, files_dir: Path, embedder: Any) -> AsyncIterator[Archivist]:
    archivist = await Archivist.open(make_settings(database_url, files_dir), embedder)
    yield archivist
    await archivist.close()


def test_old_shapes_are_read_by_the_jobs_kind() -> None:
    """No database: the model alone reads each old shape as its kind's parameters."""
    base = {"id": "00000000-0000-0000-0000-000000000001", "status": "completed", "created_at": "2026-01-01T00:00:00Z"}
    folder = Job(**base, kind="sync", params=OLD_FOLDER)
    assert folder.params == FolderSyncParams(path="/srv/my notes", recursive=False, include_patterns=["*.md"])
    assert folder.shown_params.model_dump(exclude={"kind"}) == OLD_FOLDER  # agents see what they always saw
    git = Job(**base, kind="git", params=OLD_GIT)
    assert git.params == GitSyncParams(url=OLD_GIT["url"], exclude_patterns=["a/*"])
    crawl = Job(**base, kind="recrawl", params=OLD_CRAWL)
    assert crawl.params == CrawlParams(**OLD_CRAWL) and crawl.crawl_params().max_pages == 7
    with pytest.raises(TypeError):
        folder.crawl_params()


@pytest.mark.usefixtures("owner")
async def test_old_rows_in_the_database_still_load(app: Archivist) -> None:
    source = await app.sources.create("Old jobs")
    ids = {}
    for kind, params in (("sync", OLD_FOLDER), ("git", OLD_GIT), ("crawl", OLD_CRAWL)):
        ids[kind] = await app.db.pool.fetchval(
            "INSERT INTO crawl_jobs (source_id, kind, params, status) VALUES ($1, $2, $3, 'completed') RETURNING id",
            source.id,
            kind,
            params,
        )
    assert isinstance((await app.jobs.get(ids["sync"])).params, FolderSyncParams)
    assert isinstance((await app.jobs.get(ids["git"])).params, GitSyncParams)
    assert (await app.jobs.get(ids["crawl"])).params == CrawlParams(**OLD_CRAWL)
    listed = await app.jobs.list(source_id=source.id)
    assert {type(job.params) for job in listed.items} == {FolderSyncParams, GitSyncParams, CrawlParams}


@pytest.mark.usefixtures("owner")
async def test_a_folder_sync_stores_its_own_params_and_refresh_chooses_by_kind(app: Archivist, files_dir: Path) -> None:
    folder = files_dir / "kinds"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nText.\n")
    started = await app.refresh.sync(SyncRequest(folder_path=str(folder), title="Kinds"))
    assert started.source_created and started.job.kind == "sync"
    assert started.job.params == FolderSyncParams(path=str(folder))
    stored = await app.db.pool.fetchval("SELECT params FROM crawl_jobs WHERE id = $1", started.job.id)
    stored = json.loads(stored) if isinstance(stored, str) else stored
    assert stored["kind"] == "folder" and "url" not in stored
    await app.jobs.cancel(started.job.id)
    # a recrawl of a folder source is its sync: the service decides, not the caller
    again = await app.refresh.refresh(CrawlRequest(source_id=started.job.source_id))
    assert again.job.kind == "sync" and again.job.source_id == started.job.source_id
    await app.jobs.cancel(again.job.id)
    # a source that follows nothing is re-crawled, and says it was never crawled
    upload = await app.sources.create("Uploads")
    with pytest.raises(InvalidArgument, match="never been crawled"):
        await app.refresh.refresh(CrawlRequest(source_id=upload.id))
    with pytest.raises(InvalidArgument, match="folder_path"):
        await app.refresh.sync(SyncRequest())
