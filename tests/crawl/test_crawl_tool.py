"""crawl_website through MCP (in-process client, the server's own worker), against the fixture site."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
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
from tests.support.mcp_helpers import client_in_own_task, err, ok


@pytest.fixture(scope="module")
def tool_settings(database_url: str, files_dir: Path) -> Settings:
    return make_settings(
        database_url,
        files_dir,
        crawl_delay_seconds=0,
        crawl_page_timeout=2.0,
        job_poll_seconds=0.1,
        job_heartbeat_seconds=0.5,
    )


@pytest_asyncio.fixture(scope="module")
async def client(tool_settings: Settings, embedder: Any) -> AsyncIterator[Client]:
    """A client of a server running its in-process crawl worker."""
    server = build_server(tool_settings, runtime=Runtime(tool_settings, embedder=embedder), run_worker=True)
    async with client_in_own_task(server) as connected:
        yield connected


@pytest.fixture
def site() -> Any:
    with FixtureSite() as running:
        running.set_delay("/slow", 0)
        yield running


async def crawl(client: Client, **arguments: Any) -> dict[str, Any]:
    return await ok(client, "crawl_website", **arguments)


def path_of(url: str) -> str:
    return "/" + url.split("/", 3)[3]


async def test_agent_crawls_watches_searches_and_recrawls(client: Client, site: FixtureSite) -> None:
    started = await crawl(client, action="start", url=site.url_for("/"), recursive=True, max_depth=2, max_pages=50)
    assert started["source_created"] is True and started["crawl_job"]["status"] in ("queued", "running")
    job_id, source_id = started["crawl_job"]["id"], started["source_id"]

    updates: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    arguments = {"action": "status", "job_id": job_id, "wait_seconds": 30}
    result = await client.call_tool("crawl_website", arguments, progress_callback=on_progress)
    status = json.loads(result.content[0].text)
    job = status["crawl_job"]
    assert job["status"] == "completed_with_errors", status  # /missing failed: a warning (issue 39.1)
    assert (job["pages_crawled"], job["pages_failed"], job["documents_created"]) == (9, 1, 9)
    assert job["skipped_by_reason"] == {"robots": 1, "non-text": 1, "off-scope": 1}
    assert job["recent_errors"] == [{"url": site.url_for("/missing"), "error": "HTTP 404", "http_status": 404}]
    assert job["started_at"] and job["completed_at"] and "completed with errors" in status["message"]
    assert updates, "no progress notification was sent while waiting"
    assert [p for p, _, _ in updates] == sorted({p for p, _, _ in updates})  # strictly increasing

    found = await ok(client, "search_knowledge_base", query="espresso grind size crema", source_id=source_id)
    top = found["results"][0]
    assert path_of(top["metadata"]["url"]) == "/docs/a"
    document = await ok(client, "manage_document", action="get", document_id=top["document_id"])
    assert {path_of(link["url"]) for link in document["links"]["backlinks"]} == {"/", "/docs/b"}

    site.set_page("/docs/a", html_page("Brewing Espresso", ["Pre-infusion soaks the puck gently."], [("/", "Home")]))
    again = (await crawl(client, action="recrawl", source_id=source_id, wait_seconds=30))["crawl_job"]
    assert (again["kind"], again["status"]) == ("recrawl", "completed_with_errors")
    counts = [again[f"documents_{k}"] for k in ("created", "updated", "unchanged", "deleted")]
    assert counts == [0, 1, 8, 0]

    listed = await crawl(client, action="list", source_id=source_id)
    assert [j["id"] for j in listed["jobs"]] == [again["id"], job_id]  # newest first
    assert listed["total_count"] == 2 and listed["has_more"] is False
    finished = await crawl(client, action="cancel", job_id=job_id)
    assert "already finished" in finished["message"]


async def test_start_returns_at_once_and_cancel_stops_the_job(client: Client) -> None:
    slow = FixtureSite(with_defaults=False).start()
    try:
        slow.generate(10)
        for path in list(slow.pages):
            slow.set_delay(path, 0.8)
        began = time.monotonic()
        started = await crawl(client, action="start", url=slow.url_for("/gen/"), recursive=True, title="Slow site")
        assert time.monotonic() - began < 2.0
        job_id = started["crawl_job"]["id"]
        running = await crawl(client, action="status", job_id=job_id, wait_seconds=1)
        assert running["crawl_job"]["status"] == "running" and "wait_seconds=30" in running["message"]
        began = time.monotonic()
        cancelled = await crawl(client, action="cancel", job_id=job_id)
        assert cancelled["crawl_job"]["status"] == "cancelled" and time.monotonic() - began < 2.0
        only_cancelled = await crawl(client, action="list", status="cancelled")
        assert job_id in [j["id"] for j in only_cancelled["jobs"]]
    finally:
        slow.stop()


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"action": "start", "url": "ftp://example.com/x"}, "INVALID_ARGUMENT"),
        ({"action": "start"}, "INVALID_ARGUMENT"),
        ({"action": "status"}, "INVALID_ARGUMENT"),
        ({"action": "status", "job_id": "nope"}, "INVALID_ARGUMENT"),
        ({"action": "status", "job_id": str(uuid.uuid4())}, "NOT_FOUND"),
        ({"action": "status", "job_id": str(uuid.uuid4()), "wait_seconds": -1}, "INVALID_ARGUMENT"),
        ({"action": "explode"}, "INVALID_ARGUMENT"),
        ({"action": "list", "per_page": 0}, "INVALID_ARGUMENT"),
        ({"action": "list", "status": "sleeping"}, "INVALID_ARGUMENT"),
        ({"action": "recrawl"}, "INVALID_ARGUMENT"),
        ({"action": "recrawl", "source_id": str(uuid.uuid4())}, "NOT_FOUND"),
        ({"action": "start", "url": "https://example.com", "max_pages": "many"}, "INVALID_ARGUMENT"),
    ],
)
async def test_errors_follow_the_contract(client: Client, arguments: dict[str, Any], code: str) -> None:
    await err(client, "crawl_website", code, **arguments)


async def test_limits_are_capped_with_notes(client: Client, site: FixtureSite) -> None:
    started = await crawl(
        client,
        action="start",
        url=site.url_for("/docs/a"),
        max_pages=5000,
        max_depth=9,
        wait_seconds=99,
        recursive=False,
    )
    assert (started["crawl_job"]["params"]["max_pages"], started["crawl_job"]["params"]["max_depth"]) == (100, 5)
    assert len(started["notes"]) == 4  # three caps, and: recursive=false, so only the start page
    assert any("Only the start page" in note for note in started["notes"])
    assert started["crawl_job"]["status"] == "completed" and started["crawl_job"]["pages_crawled"] == 1


async def test_start_follows_links_by_default_as_the_cli_and_console_do(client: Client, site: FixtureSite) -> None:
    """max_pages=5 without recursive: links are followed (one default whichever door), and the job says so."""
    started = await crawl(client, action="start", url=site.url_for("/"), max_pages=5, wait_seconds=30)
    assert not any("Only the start page" in note for note in started.get("notes", [])), started
    status = await crawl(client, action="status", job_id=started["crawl_job"]["id"], wait_seconds=30)
    job = status["crawl_job"]
    assert job["recursive"] is True and job["status"] == "completed", job
    assert job["pages_crawled"] > 1, job


async def test_private_targets_are_refused_without_the_setting(
    tool_settings: Settings, embedder: Any, site: FixtureSite
) -> None:
    strict = tool_settings.model_copy(update={"crawl_allow_private": False})
    server = build_server(strict, runtime=Runtime(strict, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as strict_client:
        for url in (site.url_for("/"), "http://169.254.169.254/latest/meta-data/"):
            refused = await err(strict_client, "crawl_website", "PERMISSION_DENIED", action="start", url=url)
            assert refused["retryable"] is False and "ARCHIVIST_CRAWL_ALLOW_PRIVATE" in refused["suggestion"]
        await err(
            strict_client, "manage_document", "PERMISSION_DENIED", action="create", url=site.url_for("/"), title="x"
        )
    assert site.request_log == []
