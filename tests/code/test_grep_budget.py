"""grep answers page one of a common pattern without reading every candidate block: it reads the files in
path order until the page is full, counts on for a bounded number of blocks, and says the total is a
lower bound (`total_matches_at_least`). Later pages (by offset) are still exactly the lines `re` finds at
those places, and a page past the end of the matches counts them all (`total_matches`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from mcp import Client

from server import build_server
from services.access.scope import Scope, use_scope
from services.app import Archivist, Runtime
from services.code.candidates import FIRST_FETCH
from services.code.grep import COUNT_BLOCKS, PROBE
from services.code.lines import BLOCK_LINES
from tests.support.git_server import GitServer
from tests.support.git_support import run_sync
from tests.support.mcp_helpers import client_in_own_task, ok

pytest_plugins = ("tests.support.git_fixtures",)

#: more candidate blocks than the probe and the count take, and than two reads of the candidates' cursor
BLOCKS = max(PROBE + COUNT_BLOCKS, 2 * FIRST_FETCH) + 40
HAYSTACK = "needle\n" * (BLOCKS * BLOCK_LINES)  # short lines: a block of the line index holds BLOCK_LINES
FILES = {
    "a/first.txt": "one needle before the haystack\nand a line without\n",
    "b/haystack.txt": HAYSTACK,
    "c/last.txt": "the last needle\n",
}
TOTAL = 1 + BLOCKS * BLOCK_LINES + 1


def expected(offset: int, count: int = 20) -> list[tuple[str, int]]:
    """The (path, line) of matches offset..offset+count, in path then line order."""
    lines = [("a/first.txt", 1)] + [("b/haystack.txt", n) for n in range(1, BLOCKS * BLOCK_LINES + 1)]
    return (lines + [("c/last.txt", 1)])[offset : offset + count]


@pytest_asyncio.fixture(scope="module")
async def source_id(git_app: Archivist, git_server: GitServer) -> str:
    git_server.add("haystack").commit(FILES, "first")
    with use_scope(Scope.owner()):
        config, _ = await git_app.git.bind(git_server.url("haystack"))
        await run_sync(git_app, config.source_id)
    return str(config.source_id)


@pytest_asyncio.fixture(scope="module")
async def client(git_app: Archivist, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(git_app.settings, runtime=Runtime(git_app.settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as c:
        yield c


async def grep(client: Client, source_id: str, **arguments: Any) -> dict[str, Any]:
    return await ok(client, "search_knowledge_base", search_type="grep", source_id=source_id, **arguments)


def found(page: dict[str, Any]) -> list[tuple[str, int]]:
    return [(h["path"], h["line"]) for h in page["results"]]


async def test_page_one_of_a_common_pattern_counts_to_a_bound_and_says_so(client: Client, source_id: str) -> None:
    page = await grep(client, source_id, query="needle")
    assert found(page) == expected(0)
    assert "total_matches" not in page and page["next_offset"] == 20
    # the page's own blocks (the first file's, the haystack's first), then at most COUNT_BLOCKS more (fewer
    # when COUNT_SECONDS runs out first on a starved machine)
    assert 1 + BLOCK_LINES * 2 <= page["total_matches_at_least"] <= 1 + BLOCK_LINES * (1 + COUNT_BLOCKS) < TOTAL


async def test_later_pages_by_offset_are_exact(client: Client, source_id: str) -> None:
    second = await grep(client, source_id, query="needle", offset=20)
    assert found(second) == expected(20) and second["next_offset"] == 40
    for block in (FIRST_FETCH, 2 * FIRST_FETCH):  # pages across the cursor's reads of the candidates
        across = 1 + (block - 2) * BLOCK_LINES - 10
        page = await grep(client, source_id, query="needle", offset=across)
        assert found(page) == expected(across) and page["next_offset"] == across + 20
    far = TOTAL - 30  # past what page one counted: the walk reads on until this page is full
    deep = await grep(client, source_id, query="needle", offset=far)
    assert found(deep) == expected(far) and deep["next_offset"] == far + 20
    last = await grep(client, source_id, query="needle", offset=TOTAL - 5)
    assert found(last) == expected(TOTAL - 5, 5) == [*[("b/haystack.txt", n) for n in range(TOTAL - 5, TOTAL - 1)],
                                                     ("c/last.txt", 1)]  # fmt: skip
    assert last["total_matches"] == TOTAL and "next_offset" not in last  # every file read: exact


async def test_a_rare_pattern_is_counted_exactly(client: Client, source_id: str) -> None:
    page = await grep(client, source_id, query="before the haystack|last needle")
    assert found(page) == [("a/first.txt", 1), ("c/last.txt", 1)]
    assert page["total_matches"] == 2 and "next_offset" not in page
    literal = await grep(client, source_id, query="needle before", literal=True)
    assert found(literal) == [("a/first.txt", 1)] and literal["total_matches"] == 1
