"""A job carries its rights (issue 39, item 1), the two gaps left by the first pass: a worker claims a
job only if it holds the secrets the job sends (a login's `env:` variables, a git sync's auth_env), and
a job queued by a caller confined to profiles writes only into sources those profiles still reach,
whichever worker runs it. Secrets live in a process's environment, so the worker without the secret
is a real `archivist worker` process beside this one."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from models.jobs import CrawlRequest
from services.access.scope import use_scope
from services.app import Archivist, run_worker
from tests.conftest import make_settings
from tests.support.fixture_site import FixtureSite
from tests.support.git_server import GitServer
from tests.support.git_support import TOKEN

pytest_plugins = ("tests.support.git_fixtures",)  # the git_server and git_app fixtures

ROOT = Path(__file__).resolve().parents[2]
SECRET = "DOCS_RIGHTS_TEST_TOKEN"


@pytest_asyncio.fixture(scope="module")
async def app(database_url: str, files_dir: Path, embedder: Any) -> AsyncIterator[Archivist]:
    settings = make_settings(database_url, files_dir, crawl_delay_seconds=0, job_poll_seconds=0.1)
    archivist = await Archivist.open(settings, embedder)
    yield archivist
    await archivist.close()


@pytest.fixture
def site() -> Iterator[FixtureSite]:
    with FixtureSite() as running:
        yield running


@contextlib.contextmanager
def worker_without_secret(database_url: str, files_dir: Path, log: Path, unhonoured: float) -> Iterator[None]:
    """`archivist worker` on the test database, allowing private addresses, without SECRET set."""
    env = {k: v for k, v in os.environ.items() if k != SECRET}
    env.update(
        DATABASE_URL=database_url,
        ARCHIVIST_ALLOWED_PATHS=str(files_dir),
        ARCHIVIST_CRAWL_ALLOW_PRIVATE="true",
        ARCHIVIST_JOB_POLL_SECONDS="0.05",
        ARCHIVIST_JOB_UNHONOURED_SECONDS=str(unhonoured),
        PYTHONUNBUFFERED="1",
    )
    command = [sys.executable, "-c", "import cli; cli.main()", "worker"]
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def registered_and_polled(app: Archivist, seconds: float) -> None:
    """Wait until the other worker has registered, then let it poll for `seconds`."""
    for _ in range(600):
        if await app.db.pool.fetchval("SELECT count(*) FROM job_workers"):
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the worker process never registered")
    await asyncio.sleep(seconds)


async def finish_with(app: Archivist, job_id: Any) -> Any:
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(app, stop, "in-process"))
    try:
        return await app.jobs.wait(job_id, 60, interval=0.1)
    finally:
        stop.set()
        await task


@pytest.mark.usefixtures("owner")
async def test_a_job_is_left_to_a_worker_holding_its_secret(
    app: Archivist, site: FixtureSite, files_dir: Path, database_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv(SECRET, "let-me-in")
    login = {"X-Docs-Token": f"env:{SECRET}"}
    started = await app.crawl.start(CrawlRequest(url=site.url_for("/"), max_pages=2, headers=login))
    assert started.job.rights is not None and started.job.rights.secret_names == [SECRET]
    with worker_without_secret(database_url, files_dir, tmp_path / "worker.log", unhonoured=600):
        await registered_and_polled(app, 2.0)
        job = await app.jobs.get(started.job.id)
    assert job.status == "queued", f"{job.status}: {job.error}\n{(tmp_path / 'worker.log').read_text()[-2000:]}"
    done = await finish_with(app, started.job.id)  # this process holds the secret
    assert done.status in ("completed", "completed_with_errors") and done.pages_crawled > 0, done


@pytest.mark.usefixtures("owner")
async def test_a_job_no_worker_holds_the_secret_for_fails_naming_it(
    app: Archivist, site: FixtureSite, files_dir: Path, database_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv(SECRET, "let-me-in")
    login = {"X-Docs-Token": f"env:{SECRET}"}
    started = await app.crawl.start(CrawlRequest(url=site.url_for("/docs/a"), max_pages=1, headers=login))
    with worker_without_secret(database_url, files_dir, tmp_path / "worker.log", unhonoured=1):
        await registered_and_polled(app, 3.0)
        job = await app.jobs.get(started.job.id)
    assert job.status == "failed" and job.error is not None, job
    assert f"secret variables set: {SECRET}" in job.error, job.error  # the queueing process
    assert f"secret variables set: (none) (not {SECRET})" in job.error, job.error  # the worker
    assert job.error.count("ARCHIVIST_ALLOWED_PATHS=") == 2


@pytest.mark.usefixtures("owner")
async def test_a_tenants_job_writes_only_where_its_profiles_reach(app: Archivist, site: FixtureSite) -> None:
    kept = await app.sources.create("Tenant kept")
    taken = await app.sources.create("Tenant taken away")
    await app.profiles.create("reach-tenant", source_ids=[kept.id, taken.id])
    with use_scope(await app.profiles.scope_for(["reach-tenant"], who="tenant-token")):
        started = await app.crawl.start(CrawlRequest(url=site.url_for("/"), source_id=str(taken.id), max_pages=2))
    assert started.job.rights is not None and started.job.rights.profiles == ["reach-tenant"]
    await app.profiles.update("reach-tenant", source_ids=[kept.id])  # the owner narrows the tenant meanwhile

    done = await finish_with(app, started.job.id)  # an unscoped worker (the owner's process) claims it
    assert done.status == "failed", done
    assert done.error is not None and "tenant-token" in done.error and "reach-tenant" in done.error, done.error
    assert await app.db.pool.fetchval("SELECT count(*) FROM documents WHERE source_id = $1", taken.id) == 0

    again = await app.profiles.scope_for(["reach-tenant"], who="tenant-token")
    with use_scope(again):  # within its reach, the same tenant's job runs as before
        kept_job = await app.crawl.start(CrawlRequest(url=site.url_for("/"), source_id=str(kept.id), max_pages=2))
    done = await finish_with(app, kept_job.job.id)
    assert done.status in ("completed", "completed_with_errors") and done.pages_crawled > 0, done


@pytest.mark.usefixtures("owner")
async def test_a_git_sync_carries_its_token_variable(
    git_app: Archivist, git_server: GitServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A git source's auth_env lives with its binding, not in the job's params: the job still names it,
    so only a worker whose environment sets it claims the sync."""
    repo = git_server.add("rights", private=True)
    repo.commit({"keeper.md": "# Keeper\n\nThe keeper trims the wick.\n"})
    monkeypatch.setenv("RIGHTS_GIT_TOKEN", TOKEN)
    config, _ = await git_app.git.bind(git_server.url("rights"), auth_env="RIGHTS_GIT_TOKEN")
    job = (await git_app.git.queue(config.source_id)).job
    assert job.rights is not None and job.rights.secret_names == ["RIGHTS_GIT_TOKEN"], job.rights
    await git_app.jobs.cancel(job.id)
