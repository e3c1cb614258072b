"""grep's trigram index is rebuilt in one pass after a large sync (services/code/trigram_upkeep.py): only
once enough rows came in and the inserts paused, never by two workers at once, smaller than the index
maintained row by row, and grep answers exactly what `re` finds before, during and after the rebuild. An
interrupted rebuild's invalid copy is dropped by the next one."""

from __future__ import annotations

import asyncio
import random
import re
import time

import pytest_asyncio

from services.access.scope import Scope, use_scope
from services.app import Archivist, run_worker, worker_chores
from services.code.grep import GrepRequest
from services.code.lines import split_lines
from services.code.trigram_upkeep import INDEX, LEFTOVERS_SQL, SYMBOL_INDEXES, TrigramUpkeep
from tests.support.git_server import GitServer

pytest_plugins = ("tests.support.git_fixtures",)

WORDS = ["alpha", "beta", "gamma", "delta", "copytree", "merge", "socket", "buffer", "token", "parse", "visit"]


def code_file(rng: random.Random, lines: int) -> str:
    """Short lines (a block holds BLOCK_LINES of them): many blocks from few bytes to chunk and embed."""
    return "".join(f"{rng.choice(WORDS)[:4]}_{rng.randrange(1000)} = {rng.choice(WORDS)}\n" for _ in range(lines))


RNG = random.Random(36)
FILES = {f"pkg/mod{i:02}.py": code_file(RNG, 5000) for i in range(12)}  # 300 blocks, ~1 MB
PATTERNS = [r"^copy_12\d = merge$", r"^sock_\d+ = buffer", r"= visit$"]


def oracle(pattern: str) -> set[tuple[str, int]]:
    rx = re.compile(pattern)
    return {(p, n) for p, text in FILES.items() for n, line in enumerate(split_lines(text), 1) if rx.search(line)}


async def grep_all(app: Archivist, source_id: object, pattern: str) -> set[tuple[str, int]]:
    outcome = await app.code.grep(GrepRequest(pattern, limit=1_000_000), [source_id])  # type: ignore[list-item]
    return {(h.path, h.line) for h in outcome.hits}


async def index_size(app: Archivist) -> int:
    return int(await app.db.pool.fetchval(f"SELECT pg_relation_size('{INDEX}')"))


async def symbol_index_files(app: Archivist) -> dict[str, int]:
    rows = await app.db.pool.fetch("SELECT relname, relfilenode FROM pg_class WHERE relname = ANY($1)", SYMBOL_INDEXES)
    return {r["relname"]: r["relfilenode"] for r in rows}


async def settled(upkeep: TrigramUpkeep, at_least: int) -> None:
    """Wait until the cumulative statistics show the sync's inserts (backends report them within ~1 s)."""
    deadline = time.monotonic() + 20
    while (await upkeep.since_build())[0] < at_least and time.monotonic() < deadline:
        await asyncio.sleep(0.2)


@pytest_asyncio.fixture(scope="module")
async def source_id(git_app: Archivist, git_server: GitServer) -> object:
    """The files synced and stored (grep-searchable); their embedding is not waited for (the job is
    cancelled then, as the benchmark does)."""
    git_server.add("upkeep").commit(FILES, "first")
    with use_scope(Scope.owner()):
        config, _ = await git_app.git.bind(git_server.url("upkeep"))
        started = await git_app.git.queue(config.source_id)
        stop = asyncio.Event()
        worker = asyncio.create_task(run_worker(git_app, stop, "upkeep-test"))
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                job = await git_app.jobs.get(started.job.id)
                if (
                    job.pages_crawled == len(FILES)
                    and not job.pages_pending
                    or job.status in ("completed", "failed", "cancelled")
                ):
                    break
                await asyncio.sleep(0.2)
            assert job.pages_crawled == len(FILES) and job.pages_failed == 0, job
            await git_app.jobs.cancel(started.job.id)
        finally:
            stop.set()
            await worker
    return config.source_id


async def test_the_workers_chores_include_the_rebuild(git_app: Archivist) -> None:
    assert "trigram-upkeep" in worker_chores(git_app)


async def test_a_large_sync_is_rebuilt_once_inserts_pause_smaller_and_grep_stays_exact(
    git_app: Archivist, source_id: object
) -> None:
    blocks = await git_app.db.pool.fetchval("SELECT count(*) FROM code_blocks WHERE source_id = $1", source_id)
    assert blocks >= 300
    upkeep = TrigramUpkeep(git_app.db, min_blocks=100, interval=0.1)
    await settled(upkeep, blocks)
    expected = {p: oracle(p) for p in PATTERNS}
    assert all(expected.values())
    assert {p: await grep_all(git_app, source_id, p) for p in PATTERNS} == expected
    before = await index_size(git_app)
    files = await symbol_index_files(git_app)

    assert not await upkeep.step()  # the first check only notes the insert count: writes may go on
    rebuilding = asyncio.create_task(upkeep.step())
    during = {p: await grep_all(git_app, source_id, p) for p in PATTERNS}  # the old index answers meanwhile
    assert await rebuilding
    assert during == expected
    assert {p: await grep_all(git_app, source_id, p) for p in PATTERNS} == expected
    after = await index_size(git_app)
    assert after < before * 0.8, (before, after)
    rebuilt = await symbol_index_files(git_app)  # the symbol indexes get their one pass too
    assert all(rebuilt[name] != files[name] for name in SYMBOL_INDEXES), (files, rebuilt)
    assert not await upkeep.step() and not await upkeep.step()  # nothing new since the build


async def test_one_rebuild_at_a_time_and_leftovers_dropped(git_app: Archivist, source_id: object) -> None:
    upkeep = TrigramUpkeep(git_app.db)
    async with git_app.db.pool.acquire() as holder:  # another worker rebuilding
        assert await holder.fetchval("SELECT pg_try_advisory_lock(hashtextextended('code-trigram-rebuild', 0))")
        try:
            assert not await upkeep.rebuild()
        finally:
            await holder.execute("SELECT pg_advisory_unlock(hashtextextended('code-trigram-rebuild', 0))")
    async with git_app.db.pool.acquire() as conn:  # what an interrupted REINDEX CONCURRENTLY leaves
        await conn.execute(f"CREATE INDEX {INDEX}_ccnew ON code_blocks USING gin (show_trgm(text))")
        await conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = $1::regclass", f"{INDEX}_ccnew")
        assert await conn.fetch(LEFTOVERS_SQL, INDEX)
        name = SYMBOL_INDEXES[0]  # and a symbol index's
        await conn.execute(f"CREATE INDEX {name}_ccnew ON code_symbols (name)")
        await conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = $1::regclass", f"{name}_ccnew")
    assert await upkeep.rebuild()
    assert not await git_app.db.pool.fetch(LEFTOVERS_SQL, INDEX)
    assert not await git_app.db.pool.fetch(LEFTOVERS_SQL, SYMBOL_INDEXES[0])
    assert await grep_all(git_app, source_id, PATTERNS[0]) == oracle(PATTERNS[0])
