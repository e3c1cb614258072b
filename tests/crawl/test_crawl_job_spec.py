"""The crawl job as tools-spec.md shows it (crawl_website, Response Format started / completed):
`max_pages` and `recursive` at the top level, `running` while a worker holds the job, and the start
URL counted in `pages_pending` from the moment the job is queued."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.app import Runtime
from services.core.settings import Settings
from tests.conftest import make_settings
from tests.support.fixture_site import FixtureSite, html_page
from tests.support.mcp_helpers import client_in_own_task, ok

STARTED = {"id", "source_id", "url", "status", "pages_crawled", "pages_pending", "max_pages", "recursive", "created_at"}
COMPLETED = {
    "id", "source_id", "url", "status", "pages_crawled", "pages_failed", "documents_created", "total_chunks",
    "started_at", "completed_at",
}  # fmt: skip


@pytest.fixture(scope="module")
def job_settings(database_url: str, files_dir: Path) -> Settings:
    return make_settings(
        database_url, files_dir, crawl_delay_seconds=0, crawl_page_timeout=10.0, job_poll_seconds=0.1,
        job_heartbeat_seconds=0.5,
    )  # fmt: skip


@pytest_asyncio.fixture(scope="module")
async def queue_only(job_settings: Settings, embedder: Any) -> AsyncIterator[Client]:
    """A server without a worker: jobs stay queued."""
    server = build_server(job_settings, runtime=Runtime(job_settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as connected:
        yield connected


@pytest.fixture
def slow_site() -> Any:
    site = FixtureSite(with_defaults=False).start()
    site.set_page("/", html_page("Harbour", ["Boats moor in the harbour at dusk."]))
    site.set_delay("/", 3.0)
    yield site
    site.stop()


def timestamp(value: Any) -> datetime:
    assert isinstance(value, str)
    return datetime.fromisoformat(value)


async def test_queued_job_has_spec_fields_and_its_start_url_pending(queue_only: Client, slow_site: Any) -> None:
    started = await ok(queue_only, "crawl_website", url=slow_site.url_for("/"), recursive=True, max_pages=50)
    job = started["crawl_job"]
    assert STARTED <= set(job), STARTED - set(job)
    assert (job["status"], job["pages_crawled"], job["pages_pending"]) == ("queued", 0, 1)
    assert (job["max_pages"], job["recursive"]) == (50, True)
    assert job["url"] == slow_site.url_for("/") and job["source_id"] == started["source_id"]
    timestamp(job["created_at"])
    assert "crawl_website(action='status'" in started["message"]
    await ok(queue_only, "crawl_website", action="cancel", job_id=job["id"])
    cancelled = (await ok(queue_only, "crawl_website", action="status", job_id=job["id"]))["crawl_job"]
    assert (cancelled["status"], cancelled["pages_pending"]) == ("cancelled", 0)


async def test_running_and_completed_jobs_as_the_spec_shows_them(
    job_settings: Settings, embedder: Any, slow_site: Any
) -> None:
    server = build_server(job_settings, runtime=Runtime(job_settings, embedder=embedder), run_worker=True)
    async with client_in_own_task(server) as client:
        started = await ok(client, "crawl_website", url=slow_site.url_for("/"), recursive=True, max_pages=50)
        job_id = started["crawl_job"]["id"]
        job: dict[str, Any] = started["crawl_job"]
        for _ in range(40):  # the worker claims it within moments; the start page takes 3 s to answer
            job = (await ok(client, "crawl_website", action="status", job_id=job_id))["crawl_job"]
            if job["status"] == "running":
                break
            await asyncio.sleep(0.05)
        assert STARTED <= set(job)
        assert (job["status"], job["pages_crawled"], job["pages_pending"]) == ("running", 0, 1), job
        assert (job["max_pages"], job["recursive"]) == (50, True)

        done = await ok(client, "crawl_website", action="status", job_id=job_id, wait_seconds=30)
        job = done["crawl_job"]
        assert COMPLETED <= set(job), COMPLETED - set(job)
        assert (job["status"], job["pages_crawled"], job["pages_failed"], job["documents_created"]) == (
            "completed", 1, 0, 1
        )  # fmt: skip
        assert job["total_chunks"] >= 1 and job["pages_pending"] == 0
        assert timestamp(job["started_at"]) <= timestamp(job["completed_at"])
        assert "1 pages crawled (1 new" in done["message"]
