"""Two release tags of one repository, synced under one title, are two versions of one library: grep
with `library` + `version` answers from the version asked for and says which it served (issue 36,
point 5)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from mcp import Client

from server import build_server
from services.access.scope import Scope, use_scope
from services.app import Archivist, Runtime
from services.sources.versions import tag_version
from tests.support.git_server import GitServer
from tests.support.git_support import run_sync
from tests.support.mcp_helpers import client_in_own_task, err, ok

pytest_plugins = ("tests.support.git_fixtures",)


@pytest_asyncio.fixture(scope="module")
async def client(git_app: Archivist, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(git_app.settings, runtime=Runtime(git_app.settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as c:
        yield c


def test_release_tags_name_versions_and_branches_do_not() -> None:
    assert [tag_version(r) for r in ("v0.28.1", "refs/tags/3.12.0", "0.27", "main", "HEAD", None, "feature/x")] == [
        "v0.28.1", "3.12.0", "0.27", None, None, None, None,
    ]  # fmt: skip


async def test_two_tags_are_two_versions_of_one_library(
    client: Client, git_app: Archivist, git_server: GitServer
) -> None:
    repo = git_server.add("vlib")
    old = repo.commit({"vlib/api.py": "def fetch(url):\n    return get(url, timeout=5)\n"}, "0.27")
    repo.repo.refs[b"refs/tags/0.27.0"] = old.encode()
    new = repo.commit({"vlib/api.py": "def fetch(url, *, retries=3):\n    return get(url, timeout=10)\n"}, "0.28")
    repo.repo.refs[b"refs/tags/v0.28.1"] = new.encode()
    with use_scope(Scope.owner()):
        for ref in ("0.27.0", "v0.28.1"):
            config, created = await git_app.git.bind(git_server.url("vlib"), title="vlib", ref=ref)
            assert created
            await run_sync(git_app, config.source_id)
    older = await ok(
        client, "search_knowledge_base", search_type="grep", query="timeout=", library="vlib", version="0.27"
    )
    assert [h["text"].splitlines()[h["line"] - h["line_start"]] for h in older["results"]] == [
        "    return get(url, timeout=5)"
    ]
    assert older["version"] == "0.27.0" and older["results"][0]["version"] == "0.27.0"
    assert older["results"][0]["commit"] == old and "version_note" in older  # '0.27' is 0.27.0 here
    newest = await ok(client, "search_knowledge_base", search_type="grep", query="retries", library="vlib")
    assert newest["version"] == "v0.28.1" and newest["results"][0]["commit"] == new
    await err(client, "search_knowledge_base", "NOT_FOUND", search_type="grep", query="x", library="vlib", version="9")
