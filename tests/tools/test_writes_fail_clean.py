"""Writes that fail create nothing (issue 28), through MCP: a `manage_document create` from a URL that is
missing or unreachable leaves no source behind (unreachable is retryable), a crawl that stores nothing
removes the source it created while its job still shows why, and `crawl_website start` with max_pages
but without recursive says that it crawls one page."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.app import Runtime
from services.core.settings import Settings
from tests.conftest import make_settings
from tests.support.fixture_site import FixtureSite
from tests.support.mcp_helpers import client_in_own_task, err, ok


@pytest.fixture(scope="module")
def clean_settings(database_url: str, files_dir: Path) -> Settings:
    return make_settings(database_url, files_dir, crawl_delay_seconds=0, crawl_page_timeout=2.0, job_poll_seconds=0.1)


@pytest_asyncio.fixture(scope="module")
async def client(clean_settings: Settings, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(clean_settings, runtime=Runtime(clean_settings, embedder=embedder), run_worker=True)
    async with client_in_own_task(server) as connected:
        yield connected


@pytest.fixture(scope="module")
def site() -> Iterator[FixtureSite]:
    with FixtureSite() as running:
        yield running


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def source_titles(client: Client) -> set[str]:
    listed = await ok(client, "manage_source", action="list", per_page=20)
    return {s["title"] for s in listed["sources"]}


async def test_create_from_a_missing_url_creates_no_source(client: Client, site: FixtureSite) -> None:
    url = site.url_for("/missing")
    failed = await err(client, "manage_document", "INVALID_ARGUMENT", action="create", title="Missing page", url=url)
    assert "HTTP 404" in failed["error"] and failed["retryable"] is False
    assert "Missing page" not in await source_titles(client)


async def test_create_from_an_unreachable_host_is_retryable_and_creates_no_source(client: Client) -> None:
    url = f"http://127.0.0.1:{closed_port()}/notes"
    failed = await err(client, "manage_document", "UNAVAILABLE", action="create", title="Nobody home", url=url)
    assert failed["retryable"] is True and url in failed["error"]
    assert "Nobody home" not in await source_titles(client)


async def test_a_created_source_that_received_the_document_stays(client: Client, site: FixtureSite) -> None:
    created = await ok(client, "manage_document", action="create", title="Docs A", url=site.url_for("/docs/a"))
    assert created["source_created"] is True and "Docs A" in await source_titles(client)


async def test_a_failed_crawl_removes_its_empty_source_and_keeps_its_job(client: Client, site: FixtureSite) -> None:
    url = site.url_for("/missing")
    started = await ok(client, "crawl_website", action="start", url=url, title="Never stored", recursive=False)
    assert started["source_created"] is True
    job = (await ok(client, "crawl_website", action="status", job_id=started["crawl_job"]["id"], wait_seconds=30))[
        "crawl_job"
    ]
    assert job["status"] == "failed" and job["source_id"] is None, job
    assert job["recent_errors"][0]["url"] == url and "404" in job["recent_errors"][0]["error"]
    assert any("Never stored" in w and "removed" in w for w in job["warnings"]), job["warnings"]
    assert "Never stored" not in await source_titles(client)
    again = await err(client, "crawl_website", "INVALID_ARGUMENT", action="recrawl", job_id=job["id"])
    assert "start" in again["suggestion"]


async def test_a_failed_crawl_into_an_existing_source_keeps_it(client: Client, site: FixtureSite) -> None:
    kept = await ok(client, "manage_source", action="create", title="Kept on purpose")
    source_id = kept["source"]["id"]
    started = await ok(
        client, "crawl_website", action="start", url=site.url_for("/missing"), source_id=source_id, recursive=False
    )
    job_id = started["crawl_job"]["id"]
    job = (await ok(client, "crawl_website", action="status", job_id=job_id, wait_seconds=30))["crawl_job"]
    assert job["status"] == "failed" and job["source_id"] == source_id
    assert "Kept on purpose" in await source_titles(client)


async def test_max_pages_with_recursive_false_says_one_page(client: Client, site: FixtureSite) -> None:
    started = await ok(
        client, "crawl_website", action="start", url=site.url_for("/docs/b"), max_pages=5, recursive=False
    )
    assert started["crawl_job"]["recursive"] is False
    assert any("Only the start page" in n and "recursive out" in n for n in started["notes"]), started
    plain = await ok(client, "crawl_website", action="start", url=site.url_for("/docs/a"), max_pages=5)
    assert plain["crawl_job"]["recursive"] is True  # links are followed by default
    assert not any("Only the start page" in n for n in plain.get("notes", []))
