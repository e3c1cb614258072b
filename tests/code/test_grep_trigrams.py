"""grep's candidate blocks come from an index of each block's trigram array (sql/046): a block is read
only when it holds every trigram of a literal the pattern needs. That index must never hide a matching
line: literals whose edges sit inside longer words, case, underscores, non-ASCII letters, alternatives,
and several groups of alternatives are each compared with Python's `re` over the same files. A knowledge
base indexed before sql/046 (pg_trgm's LIKE index) is converted in place and answers the same."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from importlib.resources import files
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.access.scope import Scope, use_scope
from services.app import Archivist, Runtime
from services.code.lines import split_lines
from tests.support.git_server import GitServer
from tests.support.git_support import run_sync
from tests.support.mcp_helpers import client_in_own_task, ok

pytest_plugins = ("tests.support.git_fixtures",)

FILES = {
    "a/words.py": (
        "xself.assertEqual(a, b)\n"
        "self.assertEquals(c)\n"
        "SELF.ASSERTEQUAL(d)\n"
        "def __init__(self):\n"
        "    _merge_cookies(x)\n"
        "except KeyError:\n"
        "except IndexError as e:  # café crème\n"
        "raise Café('déjà vu')\n"
        "TaskGroupX = TaskGroup()\n"
    ),
    "b/other.txt": "mergeable\nMERGE_ALL\nplain text without them\nkeyerror indexerror\n" * 3,
}
PATTERNS = [
    (r"elf\.assertEq", 0),  # starts inside the word "self"
    (r"assertEqual\(", re.IGNORECASE),
    (r"_merge_", 0),
    (r"merge", re.IGNORECASE),
    (r"except (KeyError|IndexError)", 0),
    (r"(KeyError|IndexError).*(as|:)", 0),  # two groups of alternatives: the second is left to RE2
    (r"Café\('déjà", 0),
    (r"crème", 0),
    (r"TaskGroup\(", 0),
    (r"skGro", 0),
]


def oracle(pattern: str, flags: int) -> list[tuple[str, int]]:
    rx = re.compile(pattern, flags)
    return [
        (path, n) for path in sorted(FILES) for n, line in enumerate(split_lines(FILES[path]), 1) if rx.search(line)
    ]


@pytest_asyncio.fixture(scope="module")
async def source_id(git_app: Archivist, git_server: GitServer) -> str:
    git_server.add("trigrams").commit(FILES, "first")
    with use_scope(Scope.owner()):
        config, _ = await git_app.git.bind(git_server.url("trigrams"))
        await run_sync(git_app, config.source_id)
    return str(config.source_id)


@pytest_asyncio.fixture(scope="module")
async def client(git_app: Archivist, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(git_app.settings, runtime=Runtime(git_app.settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as c:
        yield c


async def grep_lines(client: Client, source_id: str, pattern: str, flags: int) -> list[tuple[str, int]]:
    page = await ok(
        client,
        "search_knowledge_base",
        search_type="grep",
        source_id=source_id,
        query=pattern,
        case_sensitive=not flags & re.IGNORECASE,
    )
    assert "next_offset" not in page and page["total_matches"] == len(page["results"])
    return [(h["path"], h["line"]) for h in page["results"]]


@pytest.mark.parametrize(("pattern", "flags"), PATTERNS)
async def test_the_trigram_index_never_hides_a_matching_line(
    client: Client, source_id: str, pattern: str, flags: int
) -> None:
    assert await grep_lines(client, source_id, pattern, flags) == oracle(pattern, flags)


async def test_a_knowledge_base_indexed_before_046_is_converted_in_place(
    git_app: Archivist, client: Client, source_id: str
) -> None:
    pool = git_app.db.pool
    await pool.execute("DROP INDEX code_blocks_words_idx")
    await pool.execute("CREATE INDEX code_blocks_trgm_idx ON code_blocks USING gin (text gin_trgm_ops)")
    await pool.execute((files("sql") / "046_code_block_words.sql").read_text())
    await pool.execute((files("sql") / "061_slimmer_code_indexes.sql").read_text())  # then only grep's trigrams
    indexes = {
        r["indexname"] for r in await pool.fetch("SELECT indexname FROM pg_indexes WHERE tablename = 'code_blocks'")
    }
    assert "code_blocks_words_idx" in indexes and "code_blocks_trgm_idx" not in indexes
    plan = "\n".join(
        r[0]
        for r in await pool.fetch(
            "EXPLAIN SELECT ctid FROM code_blocks b WHERE code_trigrams(b.text) @> ARRAY['ass','ert']::text[]"
        )
    )
    assert "code_blocks_words_idx" in plan  # the candidates come from the index, never a filter over every block
    for pattern, flags in PATTERNS[:3]:
        assert await grep_lines(client, source_id, pattern, flags) == oracle(pattern, flags)


async def test_the_candidates_paths_are_looked_up_or_hashed_alike(
    git_app: Archivist, client: Client, source_id: str
) -> None:
    """The candidates' paths are looked up by document when the candidates are few against the files the
    catalog counts, else hashed (services/code/grep.py): both give the oracle's lines."""
    pool = git_app.db.pool
    tables = "oid IN ('git_files'::regclass, 'folder_files'::regclass)"
    try:
        for rows in (1e9, 0):  # a huge catalog: looked up; an empty one: hashed
            await pool.execute(f"UPDATE pg_class SET reltuples = {rows} WHERE {tables}")
            for pattern, flags in PATTERNS:
                assert await grep_lines(client, source_id, pattern, flags) == oracle(pattern, flags), (rows, pattern)
    finally:
        await pool.execute("ANALYZE git_files, folder_files")
