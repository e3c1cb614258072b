"""Issue 21, point 5: freshness on every result and `get`, and what changed in a source since a time.

Through a real MCP client (with a worker, for the recrawl), and at the service level for the scope.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.access.scope import Scope, use_scope
from services.app import Archivist, Runtime
from services.core.errors import InvalidArgument, NotFound
from services.documents.changes import ChangeLog
from tests.conftest import make_settings
from tests.support.fixture_site import FIXED_LAST_MODIFIED, FixtureSite, html_page
from tests.support.mcp_helpers import client_in_own_task, err, ok

GUIDE = """# Install

Download the installer and run it on the lighthouse keeper's laptop.

# Usage

Turn the lamp on at dusk; the lens rotates twice a minute.

# Maintenance

Polish the brass fittings every spring with a soft cloth.
"""


@pytest_asyncio.fixture(scope="module")
async def client(database_url: str, files_dir: Path, embedder: Any) -> AsyncIterator[Client]:
    settings = make_settings(
        database_url, files_dir, crawl_delay_seconds=0, crawl_page_timeout=2.0, job_poll_seconds=0.1
    )
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=True)
    async with client_in_own_task(server) as connected:
        yield connected


def moment(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def test_results_and_get_say_when_their_text_was_taken(client: Client, files_dir: Path) -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)
    note = await ok(client, "manage_document", action="create", title="Keeper guide", content=GUIDE)
    doc = note["document"]
    assert moment(doc["ingested_at"]) >= before and moment(doc["indexed_at"]) >= before
    assert "fetched_at" not in doc and "last_modified" not in doc

    path = files_dir / "tides.md"
    path.write_text("# Tides\n\nSpring tides follow the new and the full moon at the harbour mouth.\n")
    os.utime(path, (1_600_000_000, 1_600_000_000))
    filed = await ok(client, "manage_document", action="create", source_id=doc["source_id"], file_path=str(path))
    got = await ok(client, "manage_document", action="get", document_id=filed["document"]["id"])
    assert moment(got["document"]["last_modified"]) == datetime.fromtimestamp(1_600_000_000, UTC)
    assert moment(got["document"]["ingested_at"]) >= before

    query = "spring tides full moon"
    found = await ok(client, "search_knowledge_base", query=query, source_id=doc["source_id"], fields=["freshness"])
    hit = found["results"][0]
    assert hit["document_id"] == filed["document"]["id"]
    assert moment(hit["last_modified"]) == datetime.fromtimestamp(1_600_000_000, UTC)
    assert moment(hit["ingested_at"]) >= before and moment(hit["indexed_at"]) >= before
    packed = await ok(client, "search_knowledge_base", query="spring tides", source_id=doc["source_id"], max_tokens=200)
    assert "indexed_at" in packed["passages"][0]["citation"]


async def test_crawled_pages_carry_fetched_at_and_last_modified(client: Client) -> None:
    with FixtureSite() as site:
        started = await ok(
            client, "crawl_website", action="start", url=site.url_for("/docs/a"), wait_seconds=30, recursive=False
        )
        assert started["crawl_job"]["status"] == "completed", started
        source_id = started["source_id"]
        found = await ok(client, "search_knowledge_base", query="bees", source_id=source_id, fields=["freshness"])
        hit = found["results"][0]
        first_fetch = moment(hit["fetched_at"])
        assert "ingested_at" not in hit and moment(hit["indexed_at"]) <= first_fetch + timedelta(seconds=1)
        assert moment(hit["last_modified"]) == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
        assert FIXED_LAST_MODIFIED.startswith("Tue, 14 Nov 2023")

        # A recrawl answered 304: the text stays, fetched_at moves on, indexed_at does not.
        await asyncio.sleep(0.05)
        again = await ok(client, "crawl_website", action="recrawl", source_id=source_id, wait_seconds=30)
        assert again["crawl_job"]["documents_unchanged"] == 1, again
        got = await ok(client, "manage_document", action="get", document_id=hit["document_id"])
        assert moment(got["document"]["fetched_at"]) > first_fetch
        assert got["document"]["indexed_at"] == hit["indexed_at"]


async def test_changes_since_a_time_and_since_a_job(client: Client) -> None:
    created = await ok(client, "manage_source", action="create", title="Changing handbook")
    source_id = created["source"]["id"]
    guide = await ok(client, "manage_document", action="create", source_id=source_id, title="Guide", content=GUIDE)
    doomed = await ok(
        client, "manage_document", action="create", source_id=source_id, title="Old", content="# Old\n\nObsolete."
    )
    since = datetime.now(UTC).isoformat()
    await asyncio.sleep(0.05)

    nothing = await ok(client, "manage_source", action="changes", source_id=source_id, since=since)
    assert (nothing["total_count"], nothing["changes"]) == (0, [])
    rewritten = GUIDE.replace("twice a minute", "three times a minute")
    await ok(client, "manage_document", action="update", document_id=guide["document"]["id"], content=rewritten)
    await ok(client, "manage_document", action="delete", document_id=doomed["document"]["id"])
    added = await ok(
        client, "manage_document", action="create", source_id=source_id, title="New", content="# New\n\nFresh."
    )

    changes = await ok(client, "manage_source", action="changes", source_id=source_id, since=since)
    assert (changes["total_count"], changes["added"], changes["updated"], changes["deleted"]) == (3, 1, 1, 1)
    by_kind = {c["change"]: c for c in changes["changes"]}
    assert by_kind["updated"]["document_id"] == guide["document"]["id"]
    assert by_kind["updated"]["changed_sections"] == ["Usage"]  # Install and Maintenance are unchanged
    assert by_kind["updated"]["changed_fields"] == ["content"]
    assert (by_kind["deleted"]["document_id"], by_kind["deleted"]["title"]) == (doomed["document"]["id"], "Old")
    assert by_kind["added"]["document_id"] == added["document"]["id"]
    assert [c["change"] for c in changes["changes"]] == ["updated", "deleted", "added"]  # oldest first

    paged = await ok(client, "manage_source", action="changes", source_id=source_id, since=since, per_page=2, page=2)
    assert (paged["total_count"], paged["count"], paged["page"], paged["has_more"]) == (3, 1, 2, False)
    await err(client, "manage_source", "INVALID_ARGUMENT", action="changes", source_id=source_id)
    await err(client, "manage_source", "INVALID_ARGUMENT", action="changes", since="yesterday")


async def test_a_recrawl_links_to_its_changes(client: Client) -> None:
    with FixtureSite() as site:
        site.set_delay("/slow", 0)
        first = await ok(
            client, "crawl_website", action="start", url=site.url_for("/docs/a"), wait_seconds=30, recursive=False
        )
        source_id = first["source_id"]
        site.set_page("/docs/a", html_page("Bees, revised", ["Worker bees dance to show where nectar is."]))
        job = (await ok(client, "crawl_website", action="recrawl", source_id=source_id, wait_seconds=30))["crawl_job"]
        assert job["status"] == "completed" and job["documents_updated"] == 1, job
        assert job["changes"]["since"] == job["started_at"]
        assert f"job_id='{job['id']}'" in job["changes"]["hint"]
        status = await ok(client, "crawl_website", action="status", job_id=job["id"])
        assert status["crawl_job"]["changes"] == job["changes"]
        listed = await ok(client, "manage_source", action="changes", job_id=job["id"])
        assert [(c["change"], c["url"]) for c in listed["changes"]] == [("updated", site.url_for("/docs/a"))]
        assert listed["changes"][0]["changed_sections"]


@pytest.mark.usefixtures("owner")
async def test_changes_stay_in_the_callers_scope(database_url: str, files_dir: Path, embedder: Any) -> None:
    app = await Archivist.open(make_settings(database_url, files_dir), embedder)
    try:
        mine = await app.sources.create("Scoped mine")
        theirs = await app.sources.create("Scoped theirs")
        since = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
        await app.documents.ingest(mine.id, "A", "# A\n\nalpha text", "markdown")
        await app.documents.ingest(theirs.id, "B", "# B\n\nbeta text", "markdown")
        log = ChangeLog(app.db, app.sources)
        scope = Scope.of_profiles(frozenset({mine.id}), read_only=True, profiles=["p"], who="t")
        with use_scope(scope):
            page, _, counts = await log.list(None, since, None)
            assert {c["source_id"] for c in page.items} == {mine.id} and counts["added"] == 1
            with pytest.raises(NotFound):
                await log.list(str(theirs.id), since, None)
            with pytest.raises(InvalidArgument):
                await log.list(None, since, "not-a-uuid")
        with use_scope(Scope.owner()):
            page, _, _ = await log.list(None, since, None)
            assert {mine.id, theirs.id} <= {c["source_id"] for c in page.items}
            await app.sources.delete(theirs.id)  # no tombstones for a deleted source's documents
            page, _, _ = await log.list(None, since, None)
            assert theirs.id not in {c["source_id"] for c in page.items}
    finally:
        await app.close()


async def test_a_sync_links_to_its_changes(client: Client, files_dir: Path) -> None:
    folder = files_dir / "keeper-notes"
    folder.mkdir()
    (folder / "guide.md").write_text(GUIDE)
    (folder / "old.md").write_text("# Old\n\nObsolete notes about the fog horn.\n")
    first = await ok(
        client, "crawl_website", action="sync", folder_path=str(folder), title="Keeper notes", wait_seconds=30
    )
    assert first["crawl_job"]["status"] == "completed", first
    (folder / "guide.md").write_text(GUIDE.replace("every spring", "every autumn"))
    (folder / "old.md").unlink()
    (folder / "new.md").write_text("# New\n\nThe new lamp uses an LED array.\n")
    job = (await ok(client, "crawl_website", action="sync", source_id=first["source_id"], wait_seconds=30))["crawl_job"]
    assert job["status"] == "completed" and job["changes"]["since"] == job["started_at"], job
    listed = await ok(client, "manage_source", action="changes", job_id=job["id"])
    kinds = {c["change"]: c for c in listed["changes"]}
    assert set(kinds) == {"added", "updated", "deleted"} and listed["total_count"] == 3, listed
    assert kinds["updated"]["changed_sections"] == ["Maintenance"]
    assert kinds["deleted"]["title"] == "Old"
