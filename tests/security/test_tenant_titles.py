"""Source titles are no oracle across tenants. Profile `alpha` holds sources created every way a source is
made by name (a plain title, a title with url and version, a document's title, a crawl, a folder, a git
repository). A token confined to profile `beta`, through the SDK client over streamable HTTP against a
real `archivist serve --http`, creates a source the same way under each of those names: every call
succeeds exactly as for a name that exists nowhere, and names no `alpha` id. A collision the caller can
see still answers CONFLICT with the id; two sources it can see under one name ask for the source id."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import pytest_asyncio
from mcp import Client, StdioServerParameters

from models.jobs import CrawlRequest
from services.access.scope import Scope, use_scope
from services.core.errors import Conflict
from services.core.settings import Settings
from services.sources.versions import resolve as resolve_version
from tests.conftest import make_settings
from tests.e2e.test_e2e import ARCHIVIST, server_env
from tests.security.support import bearer_transport, http_server
from tests.support.mcp_helpers import call, client_in_own_task

LIB_URL = "https://lib.example.org/docs"
CRAWL_URL = "http://127.0.0.1:9/hidden/"
GIT_URL = "http://127.0.0.1:9/team/hidden-repo.git"


@dataclass
class Tenants:
    shared: Path  # a folder both profiles may read
    alpha_ids: set[UUID]  # every source of profile alpha (hidden from beta)
    alpha_plans: UUID
    beta_notes: UUID
    beta_secret: str


@pytest.fixture(scope="module")
def settings(database_url: str, files_dir: Path) -> Settings:
    return make_settings(database_url, files_dir, git_allow_private=True)


@pytest_asyncio.fixture(scope="module")
async def tenants(app: Any, files_dir: Path) -> Tenants:
    """alpha's sources are made as the owner (ns ''), the way the owner sets a tenant up, then given to alpha."""
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        shared = files_dir / "shared"
        shared.mkdir()
        (shared / "readme.md").write_text("# Shared\n\nA folder both teams may read.\n")
        plans = await app.sources.create(title="Hidden Plans")
        lib = await app.sources.create(title="Hidden Lib", url=LIB_URL, version="2.0")
        memo, _ = await app.sources.get_or_create("Hidden Memo")
        crawl = (await app.crawl.start(CrawlRequest(url=CRAWL_URL, title="Hidden Site"))).job.source_id
        host = (await app.crawl.start(CrawlRequest(url=CRAWL_URL))).job.source_id  # titled after the host: 127.0.0.1:9
        folder = (await app.sync.bind(str(shared)))[0].source_id
        repo = (await app.git.bind(GIT_URL))[0].source_id
        case = await app.sources.create(title="HIDDEN CASE")
        rename = await app.sources.create(title="Hidden Rename")
        stdio = await app.sources.create(title="Hidden Stdio")
        alpha = {plans.id, lib.id, memo.id, crawl, host, folder, repo, case.id, rename.id, stdio.id}
        assert len(alpha) == 10
        await app.profiles.create("alpha", "team alpha", sorted(alpha))
        notes = await app.sources.create(title="Beta Notes")
        await app.profiles.create("beta", "team beta", [notes.id], allowed_paths=[str(shared)])
        _, beta_secret = await app.tokens.create("beta-writer", ["beta"], max_running_jobs=10)
        return Tenants(shared, alpha, plans.id, notes.id, beta_secret)


@pytest_asyncio.fixture(scope="module")
async def url(tenants: Tenants, database_url: str, files_dir: Path) -> AsyncIterator[str]:
    async with http_server(database_url, files_dir, ARCHIVIST_GIT_ALLOW_PRIVATE="true") as served:
        yield served


@pytest_asyncio.fixture(scope="module")
async def beta(url: str, tenants: Tenants) -> AsyncIterator[Any]:
    async with client_in_own_task(bearer_transport(url, tenants.beta_secret)) as client:
        yield client


def names_no_alpha_source(reply: dict[str, Any], tenants: Tenants) -> bool:
    text = json.dumps(reply)
    return not any(str(sid) in text for sid in tenants.alpha_ids)


def shape(reply: dict[str, Any]) -> dict[str, Any]:
    """A reply without what differs between any two created sources (ids, titles, times, urls)."""
    volatile = {"id", "source_id", "title", "created_at", "updated_at", "url", "message", "job_id", "crawl_job"}
    return {k: (shape(v) if isinstance(v, dict) else type(v).__name__) for k, v in reply.items() if k not in volatile}


@pytest.mark.parametrize(
    ("title", "extra"),
    [("Hidden Plans", {}), ("hidden case", {}), ("Hidden Lib", {"url": LIB_URL, "version": "2.0"})],
)
async def test_manage_source_create_under_a_hidden_title(beta: Any, tenants: Tenants, title: str, extra: dict) -> None:
    hidden = await call(beta, "manage_source", action="create", title=title, **extra)
    nowhere = await call(beta, "manage_source", action="create", title=f"Nowhere {title}", **extra)
    assert hidden["success"], hidden
    assert shape(hidden) == shape(nowhere), (hidden, nowhere)
    assert UUID(hidden["source"]["id"]) not in tenants.alpha_ids and names_no_alpha_source(hidden, tenants)
    own = await call(beta, "manage_source", action="get", source_id=hidden["source"]["id"])
    assert own["success"] and own["source"]["title"] == title, own


async def test_manage_document_create_into_a_hidden_title(beta: Any, tenants: Tenants) -> None:
    hidden = await call(beta, "manage_document", action="create", content="Beta's memo on lunch.", title="Hidden Memo")
    nowhere = await call(beta, "manage_document", action="create", content="Beta's other memo.", title="Nowhere Memo")
    assert hidden["success"] and hidden["source_created"] is True, hidden
    assert shape(hidden) == shape(nowhere), (hidden, nowhere)
    assert names_no_alpha_source(hidden, tenants), hidden


@pytest.mark.parametrize("title", ["Hidden Site", None])
async def test_crawl_into_a_hidden_title(beta: Any, tenants: Tenants, title: str | None) -> None:
    extra = {"title": title} if title else {}
    hidden = await call(beta, "crawl_website", action="start", url=CRAWL_URL, **extra)
    assert hidden["success"] and hidden["source_created"] is True, hidden
    assert names_no_alpha_source(hidden, tenants), hidden


async def test_folder_sync_of_a_folder_another_tenant_bound(beta: Any, tenants: Tenants) -> None:
    hidden = await call(beta, "crawl_website", action="sync", folder_path=str(tenants.shared))
    assert hidden["success"] and hidden["source_created"] is True, hidden
    assert names_no_alpha_source(hidden, tenants), hidden


async def test_git_sync_of_a_repository_another_tenant_follows(beta: Any, tenants: Tenants) -> None:
    hidden = await call(beta, "crawl_website", action="sync", git_url=GIT_URL)
    assert hidden["success"] and hidden["source_created"] is True, hidden
    assert names_no_alpha_source(hidden, tenants), hidden


async def test_stdio_profile_creates_under_a_hidden_title(tenants: Tenants, database_url: str, files_dir: Path) -> None:
    """`serve --profile beta` over stdio confines the local user as a token is: its new source lives in
    beta's namespace, so alpha's title is no conflict there either."""
    params = StdioServerParameters(
        command=ARCHIVIST, args=["serve", "--no-worker", "--profile", "beta"], env=server_env(database_url, files_dir)
    )
    async with Client(params) as client:
        hidden = await call(client, "manage_source", action="create", title="Hidden Stdio")
    assert hidden["success"] and names_no_alpha_source(hidden, tenants), hidden


async def test_a_visible_collision_still_names_the_source(beta: Any, tenants: Tenants) -> None:
    again = await call(beta, "manage_source", action="create", title="beta notes")
    assert not again["success"] and again["error_code"] == "CONFLICT", again
    assert str(tenants.beta_notes) in json.dumps(again), again


async def test_renaming_onto_a_hidden_title_is_no_oracle(beta: Any, tenants: Tenants) -> None:
    made = await call(beta, "manage_source", action="create", title="Soon Renamed")
    hidden = await call(beta, "manage_source", action="update", source_id=made["source"]["id"], title="hidden rename")
    assert hidden["success"] and hidden["source"]["title"] == "hidden rename", hidden
    assert names_no_alpha_source(hidden, tenants), hidden


@pytest.mark.usefixtures("owner")
async def test_two_visible_sources_under_one_title_ask_for_the_id(app: Any, url: str, tenants: Tenants) -> None:
    """The owner puts alpha's and beta's "Hidden Plans" in one profile: a title no longer names one source."""
    beta_plans = await app.db.pool.fetchval(
        "SELECT id FROM sources WHERE title = 'Hidden Plans' AND id <> $1", tenants.alpha_plans
    )
    assert beta_plans is not None
    await app.profiles.create("both", "alpha and beta plans", [tenants.alpha_plans, beta_plans])
    _, secret = await app.tokens.create("both-writer", ["both"])
    async with client_in_own_task(bearer_transport(url, secret)) as both:
        doc = await call(both, "manage_document", action="create", content="Which plans?", title="Hidden Plans")
        search = await call(both, "search_knowledge_base", query="plans", library="hidden plans")
    for reply in (doc, search):
        assert not reply["success"] and reply["error_code"] in ("CONFLICT", "INVALID_ARGUMENT"), reply
        assert "source_id" in reply["error"] + reply.get("suggestion", ""), reply
        assert str(tenants.alpha_plans) in json.dumps(reply) and str(beta_plans) in json.dumps(reply), reply
    with pytest.raises(Conflict):  # the command line's --source (tests act as the local owner)
        await app.sources.resolve("Hidden Plans")
    with pytest.raises(Conflict):
        await resolve_version(app.db, "Hidden Plans", None)
    with pytest.raises(Conflict):  # the owner sees both: a third would only add to the confusion
        await app.sources.create("HIDDEN PLANS")


async def test_a_source_taken_out_of_the_profile_still_holds_its_title(app: Any, tenants: Tenants) -> None:
    """The one collision left unnamed: a source the owner took out of beta stays in beta's namespace, so
    beta re-creating its title is CONFLICT without the id (it learns only of its own profile's past)."""
    with use_scope(await app.profiles.scope_for(["beta"], who="beta-writer")):
        made = await app.sources.create("Taken Out")
    kept = [s for s in (await app.profiles.get("beta")).source_ids if s != made.id]
    await app.profiles.update("beta", source_ids=kept)
    with use_scope(await app.profiles.scope_for(["beta"], who="beta-writer")):
        with pytest.raises(Conflict) as refused:
            await app.sources.create("taken out")
    assert str(made.id) not in refused.value.message + refused.value.suggestion
