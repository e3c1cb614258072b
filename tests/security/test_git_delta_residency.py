"""A small pack whose deltas hold gigabytes while they are resolved (issue 38, weakness 2).

One 16 MB blob under 120 levels of two-child deltas is a ~110 KB pack, inside every size and inflation
budget. dulwich resolves deltas depth first and kept the base of every pending delta alive, so landing
it grew the server past +1 GB in seconds. The repository is served over smart HTTP by
tests/support/git_server.py in a process of its own and synced through the real service: the server's
peak RSS must grow by under +150 MB (the pack is landed in the parser pool with a bounded base cache),
and the sync must fail with a clear error and nothing stored. Then the landing itself, in this process:
the base cache keeps residency bounded, and a normal repository with deltas still lands whole.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from dulwich.file import GitFile
from dulwich.index import commit_tree
from dulwich.objects import Blob
from dulwich.pack import write_pack_index, write_pack_objects
from dulwich.repo import Repo

from services.access.scope import Scope, use_scope
from services.app import Archivist
from services.core.errors import OverBudget
from services.core.settings import Settings
from services.sync.git.packs import incoming_pack, store_pack
from tests.conftest import make_settings
from tests.security.bombs import MB, address_space, delta_fan_pack, measured
from tests.support.git_server import BRANCH, Repository, ServerProcess
from tests.support.git_support import run_sync, stored

#: Peak RSS growth allowed for the server process over the whole sync (issue 38: under +150 MB).
MAX_GROWTH_MB = 150
LEVELS = 120


@pytest.fixture(scope="module")
def fan_settings(database_url: str, files_dir: Path) -> Settings:
    """The default 20 MB file cap: every 16 MB blob of the pack is under it, so none is refused early."""
    return make_settings(
        database_url,
        files_dir,
        job_poll_seconds=0.1,
        job_heartbeat_seconds=0.5,
        job_stale_seconds=30.0,
        git_allow_private=True,
        parse_workers=1,
    )


@pytest_asyncio.fixture(scope="module")
async def fan_app(fan_settings: Settings, embedder: Any) -> AsyncIterator[Archivist]:
    app = await Archivist.open(fan_settings, embedder)
    with use_scope(Scope.owner()):  # the fixture warms up as the local owner
        await app.documents.create_from_text((await app.sources.create("Warm-up")).id, "warm")
    yield app
    await app.close()


def fan_repository(path: Path, levels: int = LEVELS) -> None:
    """A bare repository whose commit names `readme.md` and every blob of `delta_fan_pack`, the blobs
    stored in that pack (its index written from the entries, so nothing resolves it here)."""
    repo = Repository(path)
    pack_dir = Path(repo.repo.object_store.pack_dir)
    with open(pack_dir / "fan.pack", "wb") as file:
        entries, checksum = delta_fan_pack(file, levels)
    name = "pack-" + checksum.hex()
    os.replace(pack_dir / "fan.pack", pack_dir / f"{name}.pack")
    with GitFile(str(pack_dir / f"{name}.idx"), "wb") as index:
        write_pack_index(index, sorted(entries), checksum)
    repo.commit({"readme.md": "# Fan\n\nA note beside the layers.\n"})
    store, head = repo.repo.object_store, repo.repo[BRANCH]
    tree = [(b"readme.md", store[head.tree][b"readme.md"][1], 0o100644)]
    tree += [(b"layers/%03d.md" % index, sha.hex().encode(), 0o100644) for index, (sha, _, _) in enumerate(entries)]
    head.tree = commit_tree(store, tree)
    store.add_object(head)
    repo.repo.refs[BRANCH] = head.id
    repo.repo.close()


@pytest.fixture
def fan_server(tmp_path: Path) -> Iterator[ServerProcess]:
    root = tmp_path / "repos"
    root.mkdir()
    fan_repository(root / "fan")
    server = ServerProcess(root)
    yield server
    server.close()


@pytest.mark.usefixtures("owner")
async def test_a_delta_fan_fails_the_sync_without_growing_the_server(
    fan_app: Archivist, fan_server: ServerProcess
) -> None:
    config, _ = await fan_app.git.bind(fan_server.url("fan"), title="Fan")
    with address_space(2048), measured() as cost:  # code that keeps every base fails here, not the machine
        job = await run_sync(fan_app, config.source_id, status=None)
    assert cost.grew_mb < MAX_GROWTH_MB, f"the server grew by {cost.grew_mb:.0f} MB landing a delta fan"
    assert job.status == "failed" and job.error and "git-deltas over its budget" in job.error, job.error
    assert await stored(fan_app, config.source_id) == {}
    packs = fan_app.settings.data_dir / "git" / str(config.source_id) / "objects" / "pack"
    assert not list(packs.glob("*.pack")) and not list(packs.glob("*.idx")), list(packs.iterdir())


# ---------------------------------------------------------------- the landing (services/sync/git/deltas.py)


def test_the_base_cache_bounds_what_a_delta_fan_holds(tmp_path: Path) -> None:
    """A 4 MB blob under 60 levels fits the rebuild budget: landed whole, this process holding about the
    96 MB cache, not the 240 MB of pending bases the depth-first walk used to keep."""
    store = Repo.init_bare(str(tmp_path / "clone"), mkdir=True).object_store
    with incoming_pack(store) as received:
        entries, _ = delta_fan_pack(received, levels=60, size=4 * MB)
        with measured() as cost:
            store_pack(store, received, 20 * MB)
    assert cost.grew_mb < 150, f"landing grew this process by {cost.grew_mb:.0f} MB"
    for sha, _, _ in entries[-3:]:
        assert len(store[sha.hex().encode()].data) == 4 * MB


def test_the_rebuild_budget_refuses_a_deep_fan_and_stores_nothing(tmp_path: Path) -> None:
    store = Repo.init_bare(str(tmp_path / "clone"), mkdir=True).object_store
    with pytest.raises(OverBudget, match="git-deltas") as refused, incoming_pack(store) as received:
        delta_fan_pack(received, levels=LEVELS)
        store_pack(store, received, 20 * MB)
    assert "repack" in refused.value.suggestion.lower()
    assert sorted(os.listdir(store.pack_dir)) == []


def test_a_pack_with_ordinary_deltas_lands_whole(tmp_path: Path) -> None:
    store = Repo.init_bare(str(tmp_path / "clone"), mkdir=True).object_store
    text = b"".join(b"line %d of a long harbour ledger\n" % n for n in range(20_000))
    blobs = [Blob.from_string(text + b"revision %d\n" % n * (n + 1)) for n in range(8)]
    with incoming_pack(store) as received:
        write_pack_objects(received.write, blobs, object_format=store.object_format, deltify=True)
        store_pack(store, received, 20 * MB)
    assert all(store[blob.id].data == blob.data for blob in blobs)
