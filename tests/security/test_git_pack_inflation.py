"""A fetched pack that inflates far past its size (issue 27: "pack and blob sizes have no bound").

A blob of 100 MB of zeros deflates to ~100 KB, well under ARCHIVIST_GIT_MAX_PACK_MB, yet dulwich
inflated every object of a received pack whole (three times: copying, indexing, checking) before any
file limit applied. The repository is served by tests/support/git_server.py in a process of its own, so the
peak RSS measured here is the client's alone: the sync must finish, store the normal files, report the
big one with its size, and never hold the big blob in memory. Then the landing itself: an object over
the cap indexed from a streamed hash, the inflation budget, a delta that cannot be resolved under the cap.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from dulwich.object_store import DiskObjectStore
from dulwich.objects import Blob
from dulwich.pack import write_pack_objects
from dulwich.repo import Repo

from services.access.scope import Scope, use_scope
from services.app import Archivist
from services.core.errors import OverBudget
from services.core.settings import Settings
from services.sync.git.packs import incoming_pack, object_size, store_pack
from services.sync.git.tree import bounded
from tests.conftest import make_settings
from tests.security import bombs
from tests.security.bombs import MB, measured
from tests.support.git_server import Repository, ServerProcess
from tests.support.git_support import run_sync, stored

BIG = 100 * MB
#: Peak RSS growth allowed for the whole sync (fetch, index, plan, two small files parsed and stored).
MAX_GROWTH_MB = 60


@pytest.fixture(scope="module")
def pack_settings(database_url: str, files_dir: Path) -> Settings:
    return make_settings(
        database_url,
        files_dir,
        job_poll_seconds=0.1,
        job_heartbeat_seconds=0.5,
        job_stale_seconds=5.0,
        git_allow_private=True,
        max_file_mb=1.0,
    )


@pytest_asyncio.fixture(scope="module")
async def pack_app(pack_settings: Settings, embedder: Any) -> AsyncIterator[Archivist]:
    app = await Archivist.open(pack_settings, embedder)
    with use_scope(Scope.owner()):  # the fixture warms up as the local owner
        await app.documents.create_from_text((await app.sources.create("Warm-up")).id, "warm")
    yield app
    await app.close()


@pytest.fixture
def zeros_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A repository holding two notes and `zeros.md`, 100 MB of zeros, served from another process."""
    root = tmp_path / "repos"
    root.mkdir()
    repo = Repository(root / "zeros")
    repo.commit(
        {
            "notes.md": "# Notes\n\nA small file about lighthouses.\n",
            "guide.md": "# Guide\n\nHow to keep a lighthouse lamp lit.\n",
            "zeros.md": "\0" * BIG,
        }
    )
    repo.files.clear()  # nothing of the blob stays in this process before it is measured
    repo.repo.close()
    del repo
    server = ServerProcess(root)
    yield server
    server.close()


def pack_bytes(app: Archivist, source_id: Any) -> int:
    packs = app.settings.data_dir / "git" / str(source_id) / "objects" / "pack"
    return sum(path.stat().st_size for path in packs.glob("*.pack"))


@pytest.mark.usefixtures("owner")
async def test_a_blob_inflating_past_the_cap_is_reported_and_never_inflated(
    pack_app: Archivist, zeros_server: ServerProcess
) -> None:
    config, _ = await pack_app.git.bind(zeros_server.url("zeros"), title="Zeros")
    with bombs.address_space(2048), measured() as cost:
        job = await run_sync(pack_app, config.source_id, "completed_with_errors")  # the one blob failed
    assert pack_bytes(pack_app, config.source_id) < 2 * MB  # a small pack: the pack bound does not apply
    assert cost.grew_mb < MAX_GROWTH_MB, f"the client grew by {cost.grew_mb:.0f} MB fetching a 100 MB blob"
    assert set(await stored(pack_app, config.source_id)) == {"notes.md", "guide.md"}, job
    assert job.pages_failed == 1, job
    error = job.recent_errors[0]
    assert error.url == "zeros.md" and f"{BIG:,} bytes" in error.error, error


# ---------------------------------------------------------------- landing a pack (services/sync/git/packs.py)


def clone_store(tmp_path: Path) -> DiskObjectStore:
    return Repo.init_bare(str(tmp_path / "clone"), mkdir=True).object_store


def land(store: DiskObjectStore, objects: list[Blob], deltify: bool = False, **limits: int) -> None:
    """Write `objects` as a received pack and land it under a 1 MB cap (`limits` override)."""
    with incoming_pack(store) as received:
        write_pack_objects(received.write, objects, object_format=store.object_format, deltify=deltify)
        store_pack(store, received, limits.get("max_object_bytes", MB), limits.get("max_inflated_bytes"))


def pack_files(store: DiskObjectStore) -> list[str]:
    return sorted(os.listdir(store.pack_dir))


def test_an_object_over_the_cap_is_indexed_from_its_hash_and_refused_by_its_header(tmp_path: Path) -> None:
    store = clone_store(tmp_path)
    small, big = Blob.from_string(b"# Small\n"), Blob.from_string(b"\0" * (3 * MB))
    land(store, [small, big])
    assert big.id in store and object_size(store, big.id) == 3 * MB  # its id, hashed as it streamed past
    assert store[small.id].data == b"# Small\n"
    with pytest.raises(OverBudget, match=f"{3 * MB:,} bytes"):
        bounded(store, MB)[big.id]


def test_the_inflation_budget_counts_declared_sizes_and_stores_nothing(tmp_path: Path) -> None:
    store = clone_store(tmp_path)
    blobs = [Blob.from_string(bytes([index]) * 600_000) for index in range(3)]
    with pytest.raises(OverBudget, match="bytes inflated"):
        land(store, blobs, max_inflated_bytes=MB)
    assert pack_files(store) == [] and not any(blob.id in store for blob in blobs)


def test_a_delta_over_the_cap_fails_the_fetch_with_what_to_do(tmp_path: Path) -> None:
    store = clone_store(tmp_path)
    first, second = Blob.from_string(b"\0" * (2 * MB) + b"a"), Blob.from_string(b"\0" * (2 * MB) + b"b")
    with pytest.raises(OverBudget, match="delta") as refused:
        land(store, [first, second], deltify=True)
    assert "ARCHIVIST_MAX_FILE_MB" in refused.value.suggestion
    assert pack_files(store) == []
