"""Recrawl with new settings (crawl_website action='recrawl' with url/depth/limits/patterns) and directory
ingestion's `recursive` flag, through a real MCP client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.app import Runtime
from tests.conftest import make_settings
from tests.support.fixture_site import FixtureSite
from tests.support.mcp_helpers import client_in_own_task, err, ok


@pytest_asyncio.fixture(scope="module")
async def client(database_url: str, files_dir: Path, embedder: Any) -> AsyncIterator[Client]:
    settings = make_settings(
        database_url, files_dir, crawl_delay_seconds=0, crawl_page_timeout=2.0, job_poll_seconds=0.1
    )
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=True)
    async with client_in_own_task(server) as connected:
        yield connected


@pytest.fixture
def site() -> Any:
    with FixtureSite() as running:
        running.set_delay("/slow", 0)
        yield running


async def test_recrawl_with_new_settings(client: Client, site: FixtureSite) -> None:
    first = await ok(client, "crawl_website", action="start", url=site.url_for("/"), wait_seconds=30, recursive=False)
    assert first["crawl_job"]["params"]["recursive"] is False and first["crawl_job"]["documents_created"] == 1
    source_id = first["source_id"]
    wider = await ok(
        client,
        "crawl_website",
        action="recrawl",
        source_id=source_id,
        recursive=True,
        max_depth=1,
        max_pages=50,
        exclude_patterns=["/archive/*"],
        wait_seconds=30,
    )
    job = wider["crawl_job"]
    assert job["kind"] == "recrawl" and job["status"] == "completed_with_errors", job  # /missing, /slow fail
    assert job["params"]["recursive"] is True and job["params"]["max_depth"] == 1
    assert job["params"]["exclude_patterns"] == ["/archive/*"] and job["params"]["max_pages"] == 50
    assert job["documents_unchanged"] == 1 and job["documents_created"] > 1, job
    urls = {
        d["url"]
        for d in (await ok(client, "manage_document", action="list", source_id=source_id, per_page=20))["documents"]
    }
    assert not any("/archive/" in u for u in urls)
    # by URL alone: the source last crawled from it, with that crawl's settings
    by_url = await ok(client, "crawl_website", action="recrawl", url=site.url_for("/"), wait_seconds=30)
    assert by_url["crawl_job"]["source_id"] == source_id and by_url["crawl_job"]["params"]["max_depth"] == 1
    assert by_url["crawl_job"]["documents_created"] == 0 and by_url["crawl_job"]["documents_deleted"] == 0
    await err(client, "crawl_website", "INVALID_ARGUMENT", action="recrawl", url=site.url_for("/never-crawled"))
    await err(client, "crawl_website", "INVALID_ARGUMENT", action="recrawl", source_id=source_id, max_pages=0)


async def test_directory_ingestion_recursive_flag(client: Client, files_dir: Path) -> None:
    folder = files_dir / "tree"
    (folder / "sub").mkdir(parents=True)
    (folder / "top.md").write_text("# Top\n\nA file at the top of the tree.\n")
    (folder / "sub" / "below.md").write_text("# Below\n\nA file in a subfolder.\n")
    flat = await ok(client, "manage_document", action="create", title="flat", file_path=str(folder), recursive=False)
    assert flat["files_ingested"] == 1
    deep = await ok(client, "manage_document", action="create", title="deep", file_path=str(folder))
    assert deep["files_ingested"] == 2
