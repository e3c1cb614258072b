"""grep drops, inside PostgreSQL, the candidate blocks that hold a literal's trigrams but not the literal
(a case-sensitive pattern's required literals, by LIKE): their text never travels here. `return None`
has its trigrams in every block of `return x  # None` lines; those blocks must neither hide nor add a
line, on page one or later pages, and escaped LIKE characters (`%`, `_`, backslash) never drop a
matching line."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.access.scope import Scope, use_scope
from services.app import Archivist, Runtime
from services.code.grep import COUNT_BLOCKS, PROBE
from services.code.lines import BLOCK_LINES, split_lines
from tests.support.git_server import GitServer
from tests.support.git_support import run_sync
from tests.support.mcp_helpers import client_in_own_task, ok

pytest_plugins = ("tests.support.git_fixtures",)

BLOCKS = PROBE + COUNT_BLOCKS + 40  # more candidate blocks than the probe and the count take
FILES = {
    "a/first.py": "def f():\n    return None\n" * 25,  # page one is full before the decoys
    # the trigrams of every literal below, in more blocks than the probe reads with the candidates: one
    # decoy line to a block of BLOCK_LINES lines, the rest empty, so the file stays small to embed
    "b/decoys.py": ("    return x  # None 100 done C path to file snake case name" + "\n" * BLOCK_LINES) * BLOCKS,
    "c/last.py": "def g():\n    return None\n",
    "d/odd.txt": (
        "100%_done = 1\n100x_done\nC:\\path\\to\\file.txt\nC:/path/to/file.txt\nsnake_case_name\nsnakeXcaseXname\n"
    ),
}
TOTAL = 26


@pytest_asyncio.fixture(scope="module")
async def source_id(git_app: Archivist, git_server: GitServer) -> str:
    git_server.add("decoys").commit(FILES, "first")
    with use_scope(Scope.owner()):
        config, _ = await git_app.git.bind(git_server.url("decoys"))
        await run_sync(git_app, config.source_id)
    decoy_blocks = await git_app.db.pool.fetchval(
        "SELECT count(*) FROM code_blocks WHERE source_id = $1 AND text LIKE '%return x  # None%'", config.source_id
    )
    assert decoy_blocks >= BLOCKS, decoy_blocks  # each a candidate of every literal, without the literal
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


def oracle(pattern: str, flags: int = 0) -> list[tuple[str, int]]:
    rx = re.compile(pattern, flags)
    return [(p, n) for p in sorted(FILES) for n, line in enumerate(split_lines(FILES[p]), 1) if rx.search(line)]


async def test_blocks_without_the_literal_hide_and_add_nothing(client: Client, source_id: str) -> None:
    expected = oracle(r"return None$")
    assert len(expected) == TOTAL
    page = await grep(client, source_id, query="return None$")
    assert found(page) == expected[:20] and page["next_offset"] == 20
    assert 20 <= page.get("total_matches", page.get("total_matches_at_least")) <= TOTAL
    second = await grep(client, source_id, query="return None$", offset=20)
    assert found(second) == expected[20:] and second["total_matches"] == TOTAL  # every block read: exact


async def test_without_case_the_trigrams_alone_narrow(client: Client, source_id: str) -> None:
    """ILIKE folds case unlike RE2: a pattern without case keeps every candidate block (and its budget)."""
    page = await grep(client, source_id, query="return none$", case_sensitive=False)
    assert found(page) == oracle(r"return none$", re.IGNORECASE)[:20]
    assert page.get("total_matches_at_least", page.get("total_matches")) <= TOTAL


@pytest.mark.parametrize(
    ("query", "literal", "pattern"),
    [
        ("100%_done", True, r"100%_done"),
        (r"100%_done", False, r"100%_done"),
        ("C:\\path\\to\\file", True, r"C:\\path\\to\\file"),
        (r"C:\\path\\to", False, r"C:\\path\\to"),
        ("snake_case_name", True, r"snake_case_name"),
    ],
)
async def test_like_characters_in_literals_match_only_themselves(
    client: Client, source_id: str, query: str, literal: bool, pattern: str
) -> None:
    page = await grep(client, source_id, query=query, literal=literal)
    assert found(page) == oracle(pattern) and page["total_matches"] == len(oracle(pattern)) == 1
