"""Code navigation at a million lines: grep, definitions, references and outlines over the Python
standard library, checked against `re` and `ast`, with the index's size and the ingest time.

    nice -n 10 .venv/bin/python bench/code_nav.py            # the whole Lib/ (~880k lines)
    nice -n 10 .venv/bin/python bench/code_nav.py --subset   # every 8th file (~110k lines): a quick run

The standard library that ships with the interpreter (sysconfig's `stdlib`, Lib/ with its tests, no
site-packages) is committed into a temporary git repository served over smart HTTP on 127.0.0.1
(dulwich's WSGI server, as the tests do) and synced through the real service (a git source, an
in-process worker). Ingest time is from queueing the sync until every file is stored (keyword- and
grep-searchable); the job's embedding afterwards is not waited for (it is cancelled). Then:

- grep: 20 patterns with a literal of 3+ characters (plus two without one, which scan), answered by
  the service (`CodeSearch.grep` + `fill`, as the tool calls them) and compared with Python's `re`
  over the same files' lines (recall, precision on (path, line)); first-page latency p50/p95 warm;
  the same patterns timed with `grep -rnE` over the same files written to disk, in the same run.
  Pages past the first (offset 20, 100, 1000) are compared with the same slice of `re`'s lines.
- definitions, references, outlines (bench/code_nav_symbols.py): against Python's `ast` over the same
  files, with their latencies.
- keyword (bench/code_nav_keyword.py): keyword searches with the postings the sync left unmerged (a
  worker merges a bulk sync's postings once it pauses), the merge timed apart, the same searches after
  it, their rankings compared.
- storage: pg_total_relation_size of the line index (heap, TOAST, indexes) and of the symbol tables
  against the code's bytes.

Each section gets the synced `Bench` and returns the lines it prints. The database is DATABASE_URL
when set, else an embedded PostgreSQL under bench/.cache/code-nav-db (code-nav-subset-db for --subset);
the source is deleted afterwards unless `--keep` (then `--reuse` skips the sync and measures the kept
source again).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.code_nav_keyword import delta_section  # noqa: E402
from bench.code_nav_symbols import percentile, postgres_cpu, symbols_section  # noqa: E402
from bench.common import CACHE_DIR, machine_info  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist, run_worker  # noqa: E402
from services.code.grep import GrepRequest  # noqa: E402
from services.code.lines import indexed, split_lines  # noqa: E402
from services.code.trigram_upkeep import TrigramUpkeep  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from services.parsers.text import decode_text, looks_binary  # noqa: E402
from tests.support.git_server import GitServer  # noqa: E402

#: (pattern, flags for `re`, grep -E pattern, grep options)
PATTERNS: list[tuple[str, int, str, list[str]]] = [
    (r"def __init__\(self", 0, r"def __init__\(self", []),
    (r"class \w+Error\(", 0, r"class \w+Error\(", []),
    (r"raise ValueError", 0, r"raise ValueError", []),
    (r"^import os$", 0, r"^import os$", []),
    (r"self\.assertEqual\(", 0, r"self\.assertEqual\(", []),
    (r"@property", 0, r"@property", []),
    (r"return None$", 0, r"return None$", []),
    (r"except (KeyError|IndexError)", 0, r"except (KeyError|IndexError)", []),
    (r"__slots__ = ", 0, r"__slots__ = ", []),
    (r"if __name__ == .__main__.:", 0, r"if __name__ == .__main__.:", []),
    (r"async def \w+", 0, r"async def \w+", []),
    (r"yield from", 0, r"yield from", []),
    (r"os\.path\.join\(", 0, r"os\.path\.join\(", []),
    (r"deprecated", re.IGNORECASE, r"deprecated", ["-i"]),
    (r"struct\.pack\(", 0, r"struct\.pack\(", []),
    (r"subprocess\.run\(", 0, r"subprocess\.run\(", []),
    (r"copytree", 0, r"copytree", []),
    (r"_merge_", 0, r"_merge_", []),
    (r"HTTPConnection\.\w+", 0, r"HTTPConnection\.\w+", []),
    (r"TaskGroup", 0, r"TaskGroup", []),
]
SCANS: list[tuple[str, int, str, list[str]]] = [
    (r"^\s*\)$", 0, r"^\s*\)$", []),
    (r"\d{5}", 0, r"[0-9]{5}", []),
]
RUNS = 7  # timed page-one calls per pattern (after one warm-up)
PAGES = (20, 100, 1000)  # offsets of later pages compared with the oracle's slice
SUBSET_EVERY = 8  # --subset: every 8th file in path order (tests and library code alike)
TITLE = "bench-code-nav"
CODE_TABLES = (
    "code_blocks", "code_symbols", "code_references", "code_qualified_references", "code_symbol_files",
)  # fmt: skip


@dataclass
class Bench:
    """A synced copy of the standard library: what every section works from."""

    app: Archivist
    source_id: UUID
    files: dict[str, str]  # path -> text, as committed
    tree: Path  # the same files on disk (for grep -rnE)


SECTIONS: list[Callable[[Bench], Awaitable[list[str]]]] = []


def stdlib_files(max_files: int | None, every: int = 1) -> dict[str, str]:
    """Text files of the interpreter's standard library the line index takes (by path); `every` n-th."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*"))[::every]:
        relative = path.relative_to(root).as_posix()
        if any(part in {"site-packages", "__pycache__", "lib-dynload"} for part in path.parts):
            continue
        if not path.is_file() or path.is_symlink() or not indexed({"path": relative}):
            continue
        data = path.read_bytes()
        if not data.strip() or looks_binary(data) or len(data) > 8 * 1024 * 1024:
            continue
        out[relative] = decode_text(data).replace("\x00", "")
        if max_files and len(out) >= max_files:
            break
    return out


def oracle(files: dict[str, str], pattern: str, flags: int) -> list[tuple[str, int]]:
    """(path, line) of every line `re` matches, in path (code point) then line order."""
    rx = re.compile(pattern, flags)
    return [(p, n) for p in sorted(files) for n, line in enumerate(split_lines(files[p]), 1) if rx.search(line)]


async def grep_all(bench: Bench, pattern: str, flags: int) -> tuple[set[tuple[str, int]], bool]:
    request = GrepRequest(pattern, case_sensitive=not flags & re.IGNORECASE, limit=10_000_000)
    outcome = await bench.app.code.grep(request, [bench.source_id])
    return {(h.path, h.line) for h in outcome.hits}, outcome.scanned


async def grep_page(bench: Bench, pattern: str, flags: int, offset: int = 0) -> tuple[float, list[tuple[str, int]]]:
    """Milliseconds for one page as the tool asks for it (grep, then the lines around the hits), and its hits."""
    request = GrepRequest(pattern, case_sensitive=not flags & re.IGNORECASE, offset=offset)
    start = time.perf_counter()
    outcome = await bench.app.code.grep(request, [bench.source_id])
    await bench.app.code.fill(outcome.hits, request.context_lines)
    return (time.perf_counter() - start) * 1000, [(h.path, h.line) for h in outcome.hits]


async def pages_agree(bench: Bench, pattern: str, flags: int, expected: list[tuple[str, int]]) -> bool:
    """Later pages (by offset) hold exactly the oracle's lines at those places."""
    for offset in PAGES:
        if offset < len(expected):
            _, hits = await grep_page(bench, pattern, flags, offset)
            if hits != expected[offset : offset + 20]:
                return False
    return True


def grep_tool(tree: Path, pattern: str, options: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(["grep", "-rnE", *options, "--", pattern, "."], cwd=tree, capture_output=True, check=False)
    return (time.perf_counter() - start) * 1000


async def grep_section(bench: Bench) -> list[str]:
    header = "| pattern | matches (re) | recall | precision | pages 2+ | p50 ms | p95 ms | grep -rnE ms | x faster |"
    lines = [header, "|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    p50s, speedups, recalls, precisions, paged = [], [], [], [], []
    for pattern, flags, ere, options in PATTERNS + SCANS:
        ordered = oracle(bench.files, pattern, flags)
        expected = set(ordered)
        found, scanned = await grep_all(bench, pattern, flags)
        recall = len(found & expected) / len(expected) if expected else 1.0
        precision = len(found & expected) / len(found) if found else 1.0
        await grep_page(bench, pattern, flags)  # warm
        times = [(await grep_page(bench, pattern, flags))[0] for _ in range(RUNS)]
        tool = statistics.median(grep_tool(bench.tree, ere, options) for _ in range(3))
        p50 = statistics.median(times)
        paged.append(await pages_agree(bench, pattern, flags, ordered))
        label = f"`{pattern}`" + (" (scan)" if scanned else "")
        lines.append(
            f"| {label} | {len(expected)} | {recall:.3f} | {precision:.3f} | {'exact' if paged[-1] else 'DIFFER'} | "
            f"{p50:.1f} | {percentile(times, 0.95):.1f} | {tool:.0f} | {tool / p50:.1f} |"
        )
        if not scanned:
            p50s.append(p50)
            speedups.append(tool / p50)
        recalls.append(recall)
        precisions.append(precision)
    lines.append("")
    lines.append(
        f"grep, {len(PATTERNS)} indexed patterns: p50 of per-pattern p50 {statistics.median(p50s):.1f} ms, "
        f"worst p50 {max(p50s):.1f} ms; median speed-up over grep -rnE {statistics.median(speedups):.1f}x "
        f"(min {min(speedups):.1f}x); recall min {min(recalls):.3f}, precision min {min(precisions):.3f}; "
        f"later pages exact for {sum(paged)} of {len(paged)} patterns"
    )
    return lines


async def storage_section(bench: Bench) -> list[str]:
    size = await bench.app.db.pool.fetchval("SELECT pg_total_relation_size('code_blocks')")
    heap = await bench.app.db.pool.fetchval("SELECT pg_table_size('code_blocks')")
    trgm = await bench.app.db.pool.fetchval("SELECT pg_relation_size('code_blocks_words_idx')")
    code = sum(len(t.encode()) for t in bench.files.values())
    both = await bench.app.db.pool.fetchval(
        "SELECT sum(pg_total_relation_size(t::regclass))::bigint FROM unnest($1::text[]) t", list(CODE_TABLES)
    )
    return [
        f"line index: {size / 1e6:.1f} MB total (heap+TOAST {heap / 1e6:.1f} MB, trigram GIN {trgm / 1e6:.1f} MB) "
        f"for {code / 1e6:.1f} MB of code: {size / code:.2f}x the code's bytes",
        f"line index and symbol tables together: {both / 1e6:.1f} MB, {both / code:.2f}x the code's bytes",
    ]


SECTIONS += [grep_section, symbols_section, storage_section]


async def sync_until_stored(app: Archivist, source_id: UUID) -> float:
    """Seconds from queueing the sync until every file is stored; the job is then cancelled (its
    embedding is not part of 'searchable')."""
    start = time.perf_counter()
    started = await app.git.queue(source_id)
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(app, stop, "bench-code-nav"))
    job_id = started.job.id
    try:
        while True:
            await asyncio.sleep(0.5)
            job = await app.jobs.get(job_id)
            left = await app.db.pool.fetchval(
                "SELECT count(*) FROM crawl_frontier WHERE job_id = $1 AND state IN ('pending', 'fetching')", job_id
            )
            seeded = await app.db.pool.fetchval("SELECT count(*) FROM crawl_frontier WHERE job_id = $1", job_id)
            if job.status in ("failed", "cancelled"):
                raise SystemExit(f"sync {job.status}: {job}")
            if seeded and not left or job.status == "completed":
                seconds = time.perf_counter() - start
                break
        if job.status != "completed":
            await app.jobs.cancel(job_id)
    finally:
        stop.set()
        await worker
    return seconds


async def ingest(app: Archivist, server: GitServer, title: str, lines: int) -> UUID:
    """Sync the repository as a new git source (an earlier run's bench sources deleted first)."""
    for stale in await app.db.pool.fetch("SELECT id FROM sources WHERE title LIKE $1", f"{TITLE}-%"):
        await app.sources.delete(stale["id"])  # an interrupted run's (the storage figure counts all)
    config, _ = await app.git.bind(server.url("stdlib"), title=title)
    cpu, pg_cpu = time.process_time(), postgres_cpu(app.settings.data_dir)
    seconds = await sync_until_stored(app, config.source_id)
    cpu = time.process_time() - cpu  # this process's CPU (the worker runs in it)
    after = postgres_cpu(app.settings.data_dir)
    stored = await app.db.pool.fetchval("SELECT count(*) FROM git_files WHERE source_id = $1", config.source_id)
    rate = f"{lines / seconds:.0f} lines/s; CPU {cpu:.0f} s in this process"
    if pg_cpu is not None and after is not None:
        rate += f", {after - pg_cpu:.0f} s in PostgreSQL"
    print(f"ingest: {stored} files stored (keyword- and grep-searchable) in {seconds:.1f} s ({rate})")
    print(f"load average at the end of ingest: {os.getloadavg()[0]:.1f} (2 cores)")
    return config.source_id


async def rebuild_trigrams(app: Archivist) -> None:
    """What a worker's trigram upkeep does once a large sync's inserts pause (services/code/trigram_upkeep.py):
    the trigram index rebuilt in one pass. Timed apart: grep answers from the old index meanwhile."""
    start, pg_cpu = time.perf_counter(), postgres_cpu(app.settings.data_dir)
    rebuilt = await TrigramUpkeep(app.db).rebuild()
    after = postgres_cpu(app.settings.data_dir)
    cpu = f", {after - pg_cpu:.0f} s CPU in PostgreSQL" if pg_cpu is not None and after is not None else ""
    print(f"trigram index rebuilt in one pass after the sync: {rebuilt}, {time.perf_counter() - start:.1f} s{cpu}")


async def settle(app: Archivist, limit: float = 600.0) -> None:
    """Wait until nothing else runs in the database (autovacuum of the tables the sync wrote, a postings
    merge the stopped worker left): grep is timed warm and alone, as a user sees it once the sync's
    background work is done."""
    start = time.perf_counter()
    seen: set[str] = set()
    while time.perf_counter() - start < limit:
        busy = await app.db.pool.fetch(
            "SELECT backend_type, left(query, 50) AS query FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
            "AND state IS DISTINCT FROM 'idle' AND backend_type IN ('client backend', 'autovacuum worker')"
        )
        if not busy:
            break
        seen.update(f"{r['backend_type']}: {r['query']}" for r in busy)
        await asyncio.sleep(1.0)
    print(f"background work settled after {time.perf_counter() - start:.1f} s (seen: {sorted(seen) or 'none'})")


async def kept_source(app: Archivist, title: str) -> UUID | None:
    """A source an earlier `--keep` run stored under this title (its sync job was cancelled once every
    file was stored, so the source has no completed sync: files it lacks are named as not stored)."""
    return await app.db.pool.fetchval("SELECT id FROM sources WHERE title = $1", title)


async def main(args: argparse.Namespace) -> None:
    files = stdlib_files(args.max_files, SUBSET_EVERY if args.subset else 1)
    lines = sum(len(split_lines(t)) for t in files.values())
    size = sum(len(t.encode()) for t in files.values())
    print(f"machine: {machine_info()}")
    which = "standard library" + (" (--subset)" if args.subset else "")
    print(f"{which}: {len(files)} files, {lines} lines, {size / 1e6:.1f} MB")
    root = CACHE_DIR / "code-nav"
    shutil.rmtree(root, ignore_errors=True)
    tree = root / "tree"
    for path, text in files.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
    (root / "repos").mkdir(parents=True)
    server = GitServer(root / "repos", "unused")
    server.add("stdlib").commit(files, "the standard library")
    settings = Settings(
        _env_file=None,
        database_url=args.database_url or os.environ.get("DATABASE_URL"),
        data_dir=CACHE_DIR / ("code-nav-subset-db" if args.subset else "code-nav-db"),  # a --keep of each stays
        git_allow_private=True,
        job_poll_seconds=0.05,
        run_worker=False,
    )
    title = f"{TITLE}-{'subset' if args.subset else 'all'}-{len(files)}"
    app = await Archivist.open(settings)
    try:
        with use_scope(Scope.owner("bench")):
            source_id = await kept_source(app, title) if args.reuse else None
            if source_id is None:
                source_id = await ingest(app, server, title, lines)
                print("\n".join(await delta_section(app, source_id)), flush=True)  # the merge the sync deferred
                await rebuild_trigrams(app)
            else:
                print(f"ingest: not measured (--reuse: the source a --keep run synced, {source_id})")
            paths = {
                r["path"] for r in await app.db.pool.fetch("SELECT path FROM git_files WHERE source_id = $1", source_id)
            }
            missing = sorted(set(files) - paths)
            if missing:  # not stored (a parse failure): left out of the oracle too, and named
                print(f"{len(missing)} files not stored, left out of the comparison: {missing[:5]}")
            start = time.perf_counter()
            for table in CODE_TABLES:  # what autovacuum does after a bulk load: sizes without dead rows
                await app.db.pool.execute(f"VACUUM ANALYZE {table}")
            print(f"VACUUM ANALYZE of the line index and symbol tables: {time.perf_counter() - start:.1f} s")
            if not args.no_settle:
                await settle(app)
            bench = Bench(app, source_id, {p: t for p, t in files.items() if p in paths}, tree)
            for section in SECTIONS:
                print("\n".join(await section(bench)), flush=True)
            if not args.keep:
                await app.sources.delete(source_id)
                shutil.rmtree(settings.data_dir / "git" / str(source_id), ignore_errors=True)
    finally:
        await app.close()
        server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subset", action="store_true", help=f"every {SUBSET_EVERY}th file only: a quick run")
    parser.add_argument("--max-files", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="leave the synced source for a later --reuse")
    parser.add_argument("--reuse", action="store_true", help="measure the source a --keep run left (no ingest)")
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--no-settle", action="store_true", help="time grep without waiting for background work")
    logging.basicConfig(level=getattr(logging, os.environ.get("BENCH_LOG", "WARNING")), stream=sys.stderr)
    asyncio.run(main(parser.parse_args()))
