"""Per-host politeness holds across worker processes (state in PostgreSQL), measured at the fixture site.

Two `archivist worker`-equivalent processes each take one of two jobs crawling the same host. Jobs are
claimed whole by one worker, so two processes meet on one host through different jobs (or a job and a
recrawl of another source): their combined requests to the host must respect the per-host limits.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from models.jobs import CrawlRequest
from services.app import Archivist
from tests.conftest import make_settings
from tests.support.fixture_site import FixtureSite

ROOT = Path(__file__).resolve().parents[2]
PAGES_PER_SECTION = 8


@pytest_asyncio.fixture(scope="module")
async def queue_app(database_url: str, files_dir: Path, embedder: Any) -> AsyncIterator[Archivist]:
    app = await Archivist.open(make_settings(database_url, files_dir, crawl_delay_seconds=0), embedder)
    yield app
    await app.close()


def two_section_site(server_delay: float) -> FixtureSite:
    site = FixtureSite(with_defaults=False).start()
    for section in ("/a/", "/b/"):
        site.generate(PAGES_PER_SECTION - 1, prefix=section, fanout=3)
    for path in list(site.pages):
        site.set_delay(path, server_delay)
    return site


def start_workers(database_url: str, files_dir: Path, per_host: int, delay: float) -> list[subprocess.Popen]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "ARCHIVIST_DATA_DIR": str(files_dir.parent / "data"),
        "ARCHIVIST_ALLOWED_PATHS": str(files_dir),
        "ARCHIVIST_CRAWL_ALLOW_PRIVATE": "true",
        "ARCHIVIST_CRAWL_DELAY_SECONDS": str(delay),
        "ARCHIVIST_CRAWL_PER_HOST_CONCURRENCY": str(per_host),
        "ARCHIVIST_JOB_POLL_SECONDS": "0.1",
    }
    script = str(ROOT / "tests" / "support" / "crawl_worker_proc.py")
    return [
        subprocess.Popen([sys.executable, script, f"w{i}", "1"], cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
        for i in range(2)
    ]


async def crawl_both_sections(app: Archivist, site: FixtureSite, workers: list[subprocess.Popen]) -> list[Any]:
    run = site.port  # a source per test run: pages identical to an earlier run's would be stored once
    jobs = [
        await app.crawl.start(
            CrawlRequest(
                url=site.url_for(section),
                title=f"Section {section} {run}",
                scope="under-path",
                max_pages=50,
                recursive=True,
                max_depth=5,
            )
        )
        for section in ("/a/", "/b/")
    ]
    deadline = time.monotonic() + 120
    finished = []
    try:
        for started in jobs:
            job = await app.jobs.wait(started.job.id, max(1.0, deadline - time.monotonic()), interval=0.1)
            assert job.finished and job.status == "completed", job
            finished.append(job)
    finally:
        for proc in workers:
            proc.terminate()
        for proc in workers:
            proc.wait(timeout=20)
    return finished


def page_starts(site: FixtureSite) -> list[float]:
    return sorted(r.time for r in site.request_log if r.path.startswith(("/a/", "/b/")))


@pytest.mark.usefixtures("owner")
async def test_per_host_concurrency_holds_across_processes(
    queue_app: Archivist, database_url: str, files_dir: Path
) -> None:
    server_delay = 0.25
    site = two_section_site(server_delay)
    try:
        workers = start_workers(database_url, files_dir, per_host=1, delay=0)
        jobs = await crawl_both_sections(queue_app, site, workers)
    finally:
        site.stop()
    assert {job.worker_id for job in jobs} == {"w0", "w1"}, "each process should have taken one job"
    assert sum(job.pages_crawled for job in jobs) == 2 * PAGES_PER_SECTION
    starts = page_starts(site)
    assert len(starts) == 2 * PAGES_PER_SECTION
    # per-host concurrency 1: a request starts only after the previous one (server_delay long) ended
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert min(gaps) >= server_delay - 0.02, gaps


@pytest.mark.parametrize("delay", [0.3])
@pytest.mark.usefixtures("owner")
async def test_min_delay_holds_across_processes(
    queue_app: Archivist, database_url: str, files_dir: Path, delay: float
) -> None:
    site = two_section_site(0.0)
    try:
        workers = start_workers(database_url, files_dir, per_host=2, delay=delay)
        jobs = await crawl_both_sections(queue_app, site, workers)
    finally:
        site.stop()
    assert {job.worker_id for job in jobs} == {"w0", "w1"}
    starts = page_starts(site)
    assert len(starts) == 2 * PAGES_PER_SECTION
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    # Start times are reserved on the database clock; arrival adds each request's own jitter, so
    # check the span (two unshared processes would need only half of it) and no near-zero gap.
    assert starts[-1] - starts[0] >= 0.95 * delay * (len(starts) - 1), gaps
    assert min(gaps) >= 0.5 * delay, gaps


async def test_without_shared_state_two_processes_would_overlap(queue_app: Archivist) -> None:
    """The measurement can fail: two throttles with no shared gate let requests to one host overlap."""
    from services.crawl.politeness import HostThrottle, SharedHostGate

    local = [HostThrottle(1, 0.0, 4), HostThrottle(1, 0.0, 4)]
    inside = 0
    peak = 0

    async def request(throttle: HostThrottle) -> None:
        nonlocal inside, peak
        async with throttle.slot("http://127.0.0.1:9/x"):
            inside += 1
            peak = max(peak, inside)
            await asyncio.sleep(0.05)
            inside -= 1

    await asyncio.gather(*(request(t) for t in local for _ in range(3)))
    assert peak == 2
    gated = [HostThrottle(1, 0.0, 4, shared=SharedHostGate(queue_app.db.dsn, 4)) for _ in range(2)]
    inside = peak = 0
    try:
        await asyncio.gather(*(request(t) for t in gated for _ in range(3)))
    finally:
        for throttle in gated:
            await throttle.close()
    assert peak == 1
