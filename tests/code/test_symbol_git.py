"""The symbol table follows a git source's syncs (issue 36): definitions carry the synced commit, and a
commit that renames, changes and deletes files moves, rewrites and drops their symbols; through a real
MCP client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.app import Archivist, Runtime
from tests.support.git_server import GitServer
from tests.support.git_support import run_sync
from tests.support.mcp_helpers import client_in_own_task, ok

pytest_plugins = ("tests.support.git_fixtures",)  # the git_server and git_app fixtures

CLIENT = (
    '"""HTTP client."""\n\n\nclass Client:\n    def send(self, request):\n        """Send a request."""\n'
    "        return _merge_cookies(request)\n\n\ndef _merge_cookies(request):\n    return request\n"
)
MODELS = "from ._client import Client\n\n\ndef build():\n    return Client().send(None)\n"


@pytest_asyncio.fixture(scope="module")
async def client(git_app: Archivist, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(git_app.settings, runtime=Runtime(git_app.settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as c:
        yield c


async def definitions(client: Client, query: str, source_id: str) -> list[tuple[str, int, str]]:
    found = await ok(client, "search_knowledge_base", query=query, search_type="definition", source_id=source_id)
    return [(h["path"], h["line_start"], h["commit"]) for h in found["results"]]


@pytest.mark.usefixtures("owner")
async def test_symbols_follow_commits_that_rename_change_and_delete(
    client: Client, git_app: Archivist, git_server: GitServer
) -> None:
    repo = git_server.add("httpish")
    first = repo.commit({"httpish/_client.py": CLIENT, "httpish/_models.py": MODELS}, "first")
    config, _ = await git_app.git.bind(git_server.url("httpish"))
    source = str(config.source_id)
    await run_sync(git_app, config.source_id)
    assert await definitions(client, "Client.send", source) == [("httpish/_client.py", 5, first)]
    uses = await ok(client, "search_knowledge_base", query="_merge_cookies", search_type="references", source_id=source)
    assert [(h["path"], h["line"], h["commit"]) for h in uses["results"]] == [("httpish/_client.py", 7, first)]

    repo.rename("httpish/_client.py", "httpish/client.py")  # same content, new path
    second = repo.commit({"httpish/_models.py": None, "httpish/api.py": "def get(url):\n    return url\n"})
    await run_sync(git_app, config.source_id)
    assert await definitions(client, "Client.send", source) == [("httpish/client.py", 5, second)]
    assert await definitions(client, "build", source) == []  # its file was deleted
    assert await definitions(client, "httpish.api.get", source) == [("httpish/api.py", 1, second)]
    outline = await ok(client, "manage_document", action="outline", source_id=source, path="httpish/client.py")
    assert [s["qualified_name"] for s in outline["outline"]["symbols"]] == [
        "httpish.client.Client", "httpish.client.Client.send", "httpish.client._merge_cookies",
    ]  # fmt: skip
