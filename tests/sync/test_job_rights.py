"""A job carries its rights (issue 39, item 1): what it may do is decided when it is queued and stored
with it; a worker that cannot honour it leaves it to one that can, or fails it after waiting too long,
naming both processes' settings. A server's worker with no allowed paths (its own knowledge base handle on
a thread, polling fast) beside `archivist sync DIR` on the same database: once a real process, then
`cli.main` in this one."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import pytest_asyncio

from models.jobs import CrawlRequest
from services.access.scope import Scope, use_scope
from services.app import Archivist, run_worker
from services.core.settings import Settings
from tests.conftest import make_settings
from tests.support.cli_process import run_in_process
from tests.support.fixture_site import FixtureSite

ROOT = Path(__file__).resolve().parents[2]
SYNC_RUNS = 4


def server_without_paths(database_url: str, files_dir: Path) -> Settings:
    """An HTTP server's settings (`for_http`) with ARCHIVIST_ALLOWED_PATHS="" (no path), polling fast."""
    return make_settings(database_url, files_dir, allowed_paths="", job_poll_seconds=0.05).for_http()


def cli_sync(folder: Path, database_url: str, allowed: Path, process: bool) -> subprocess.CompletedProcess[str]:
    """`archivist sync DIR`: a real process, or cli.main in this one (still another process than the
    server's worker, which is what races it)."""
    env = {**os.environ, "DATABASE_URL": database_url, "ARCHIVIST_ALLOWED_PATHS": str(allowed)}
    args = ["sync", str(folder), "--title", "Beside a server"]
    if not process:
        return run_in_process(args, env)
    command = [sys.executable, "-c", "import cli; cli.main()", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)


def test_cli_sync_is_never_failed_by_a_server_worker_without_paths(
    database_url: str, files_dir: Path, embedder: Any
) -> None:
    folder = files_dir / "beside"
    folder.mkdir()
    (folder / "one.md").write_text("# One\n\nA file the server may not read, synced from the shell.\n")
    settings = server_without_paths(database_url, files_dir)
    assert settings.allowed_paths == []
    with worker_beside(settings, embedder, "server-without-paths"):
        for run in range(SYNC_RUNS):
            (folder / f"run{run}.md").write_text(f"# Run {run}\n\nWritten before sync number {run}.\n")
            done = cli_sync(folder, database_url, files_dir, process=run == 0)
            assert done.returncode == 0, f"run {run}: {done.stdout}\n{done.stderr[-2000:]}"
            assert "turned off" not in done.stdout + done.stderr
            assert ": completed" in done.stdout, done.stdout


# ---------------------------------------------------------------- in-process: private addresses


@pytest_asyncio.fixture(scope="module")
async def private_app(database_url: str, files_dir: Path, embedder: Any) -> AsyncIterator[Archivist]:
    """A process with ARCHIVIST_CRAWL_ALLOW_PRIVATE=true."""
    settings = make_settings(
        database_url, files_dir, crawl_delay_seconds=0, crawl_page_timeout=2.0, job_poll_seconds=0.1
    )
    app = await Archivist.open(settings, embedder)
    yield app
    await app.close()


@pytest_asyncio.fixture(scope="module")
async def strict_app(database_url: str, files_dir: Path, embedder: Any) -> AsyncIterator[Archivist]:
    """A process with the default policy (private addresses refused) and a quick give-up."""
    settings = make_settings(
        database_url,
        files_dir,
        crawl_allow_private=False,
        crawl_delay_seconds=0,
        job_poll_seconds=0.1,
        job_unhonoured_seconds=3.0,
    )
    app = await Archivist.open(settings, embedder)
    yield app
    await app.close()


@pytest.fixture
def site() -> Iterator[FixtureSite]:
    with FixtureSite() as running:
        yield running


async def work_for(app: Archivist, seconds: float, name: str) -> None:
    """Run an in-process worker of `app` for a while."""
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(app, stop, name))
    await asyncio.sleep(seconds)
    stop.set()
    await task


async def finish_with(app: Archivist, job_id: UUID, name: str) -> Any:
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(app, stop, name))
    try:
        return await app.jobs.wait(job_id, 60, interval=0.1)
    finally:
        stop.set()
        await task


@pytest.mark.usefixtures("owner")
async def test_a_private_crawl_is_left_to_a_worker_that_allows_it(
    private_app: Archivist, strict_app: Archivist, site: FixtureSite
) -> None:
    started = await private_app.crawl.start(CrawlRequest(url=site.url_for("/"), max_pages=3))
    assert started.job.rights is not None and started.job.rights.allow_private
    await work_for(strict_app, 1.5, "strict")
    job = await strict_app.jobs.get(started.job.id)
    assert job.status == "queued" and job.pages_failed == 0, job
    done = await finish_with(private_app, started.job.id, "private")
    assert done.status in ("completed", "completed_with_errors") and done.pages_crawled > 0, done
    assert not [e for e in done.recent_errors if "loopback" in e.error or "private" in e.error]


@pytest.mark.usefixtures("owner")
async def test_a_job_no_worker_can_honour_fails_naming_both_settings(
    private_app: Archivist, strict_app: Archivist, site: FixtureSite
) -> None:
    started = await private_app.crawl.start(CrawlRequest(url=site.url_for("/docs/a"), max_pages=1))
    await work_for(strict_app, 4.5, "strict")  # longer than its job_unhonoured_seconds
    job = await strict_app.jobs.get(started.job.id)
    assert job.status == "failed", job
    assert job.error is not None
    assert "ARCHIVIST_CRAWL_ALLOW_PRIVATE=true" in job.error and "ARCHIVIST_CRAWL_ALLOW_PRIVATE=false" in job.error
    assert job.error.count("ARCHIVIST_ALLOWED_PATHS=") == 2


@pytest.mark.usefixtures("owner")
async def test_a_job_queued_before_rights_runs_as_before(
    private_app: Archivist, strict_app: Archivist, site: FixtureSite
) -> None:
    started = await private_app.crawl.start(CrawlRequest(url=site.url_for("/docs/b"), max_pages=1))
    await private_app.db.pool.execute("UPDATE crawl_jobs SET rights = NULL WHERE id = $1", started.job.id)
    done = await finish_with(strict_app, started.job.id, "strict")  # the claiming worker's settings apply
    assert done.rights is None
    assert done.status == "failed" and done.pages_crawled == 0, done


# ---------------------------------------------------------------- is any worker there to take it?


def cli(*args: str, database_url: str, allowed: Path) -> subprocess.CompletedProcess[str]:
    """`archivist ARGS` in this process (tests/support/cli_process.py), another process than the worker's
    as far as the command can tell: it opens its own connections and runs no worker."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "ARCHIVIST_ALLOWED_PATHS": str(allowed),
        "ARCHIVIST_CRAWL_ALLOW_PRIVATE": "true",
    }
    return run_in_process(list(args), env)


@contextlib.contextmanager
def worker_beside(settings: Settings, embedder: Any, name: str) -> Iterator[Callable[[], int]]:
    """A worker named `name` running in a thread on its own event loop and knowledge base handle, so the
    commands beside it run in this thread (`cli`, which needs the main thread and no running loop).
    Entered once the worker is registered; on leaving, it finishes the queued jobs, then stops. Yields
    a function that, after the block, is how many workers remain registered."""
    registered, finish = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    async def work() -> None:
        app = await Archivist.open(settings, embedder)
        try:
            stop = asyncio.Event()
            worker = asyncio.create_task(run_worker(app, stop, name))
            try:
                sql = "SELECT count(*) FROM job_workers WHERE id = $1"
                while not await app.db.pool.fetchval(sql, name):
                    assert not worker.done(), worker
                    await asyncio.sleep(0.02)
                registered.set()
                await asyncio.to_thread(finish.wait)
                for job in (await app.jobs.list(None, None, 1, 20)).items:
                    await app.jobs.wait(job.id, 60, interval=0.1)
            finally:
                stop.set()
                await worker
            outcome["left"] = await app.db.pool.fetchval("SELECT count(*) FROM job_workers")
        finally:
            await app.close()

    def thread_main() -> None:
        try:
            with use_scope(Scope.owner()):
                asyncio.run(work())
        except BaseException as exc:
            outcome["error"] = exc
            registered.set()

    thread = threading.Thread(target=thread_main, name=f"worker-{name}")
    thread.start()
    try:
        registered.wait(60)
        assert "error" not in outcome and registered.is_set(), outcome
        yield lambda: outcome["left"]
    finally:
        finish.set()
        thread.join(90)
    assert "error" not in outcome, outcome


def test_detach_warns_without_a_worker_and_doctor_tells_workers_from_itself(
    database_url: str, files_dir: Path, embedder: Any, site: FixtureSite
) -> None:
    url = site.url_for("/docs/a")
    alone = cli("crawl", url, "--detach", database_url=database_url, allowed=files_dir)
    assert alone.returncode == 0, alone.stderr[-2000:]
    assert "No worker is running" in alone.stderr, alone.stderr
    report = cli("doctor", database_url=database_url, allowed=files_dir).stdout
    assert "none running" in report and "this process (doctor) runs no worker" in report, report
    assert "in-process worker" not in report

    settings = make_settings(
        database_url, files_dir, crawl_delay_seconds=0, crawl_page_timeout=2.0, job_poll_seconds=0.1
    )  # private_app's: ARCHIVIST_CRAWL_ALLOW_PRIVATE=true
    with worker_beside(settings, embedder, "registry-test") as workers_left:
        taken = cli("crawl", url, "--detach", database_url=database_url, allowed=files_dir)
        assert taken.returncode == 0, taken.stderr[-2000:]
        assert "No worker" not in taken.stderr and "None of the" not in taken.stderr, taken.stderr
        report = cli("doctor", database_url=database_url, allowed=files_dir).stdout
        assert "1 running (registry-test)" in report, report
        health = json.loads(cli("doctor", "--json", database_url=database_url, allowed=files_dir).stdout)
        assert health["worker"]["live_workers"] == ["registry-test"]
    assert workers_left() == 0  # it left as it stopped
