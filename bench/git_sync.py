"""Git sync: re-sync time of an unchanged repository of 1,000 files, and of one with 10 changed files.

    nice -n 10 .venv/bin/python bench/git_sync.py --files 1000 [--changed 10]

Builds a repository of `--files` small markdown files (100 folders), serves it over smart HTTP on
127.0.0.1 (dulwich's WSGI server, as the tests do), binds it to a git source and syncs it once (a
clone; every file parsed, chunked, embedded). Then it times, from queueing the job to its completion
with an in-process worker (as `archivist sync --git` runs it): a re-sync with no new commit (a fetch
that brings nothing; no tree is compared), a re-sync after a commit changing `--changed` files (a
fetch, a tree diff, only those files read and embedded), and one after a commit changing nothing of
the source (a file outside the patterns). The database is DATABASE_URL when set, else an embedded
PostgreSQL under bench/.cache/git-sync-db; the source is deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import CACHE_DIR  # noqa: E402
from models.jobs import CrawlJob  # noqa: E402
from services.app import Archivist, run_worker  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from tests.support.git_server import GitServer  # noqa: E402

WORDS = "river stone lantern orchard copper meadow harbor signal timber glacier violet ember".split()


def note(i: int, edit: str = "") -> str:
    words = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(60))
    return f"# Note {i}\n\nNote number {i} is about {WORDS[i % len(WORDS)]}. {words}\n{edit}"


def path(i: int) -> str:
    return f"docs/part{i % 100:02d}/note{i:05d}.md"


async def timed_sync(app: Archivist, source_id: object) -> tuple[CrawlJob, float]:
    start = time.perf_counter()
    started = await app.git.queue(source_id)
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(app, stop, "bench-git-sync"))
    try:
        job = await app.jobs.wait(started.job.id, 3600, interval=0.05)
    finally:
        stop.set()
        await worker
    return job, time.perf_counter() - start


def row(label: str, job: CrawlJob, seconds: float) -> str:
    counts = (job.documents_created, job.documents_updated, job.documents_deleted, job.chunks_embedded)
    cells = " | ".join(f"{n:>{w}}" for n, w in zip(counts, (7, 7, 7, 8), strict=True))
    return f"| {label:<44} | {seconds:>7.2f} | {job.status:<9} | {cells} |"


async def main(args: argparse.Namespace) -> None:
    root = CACHE_DIR / "git-sync-repos"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    server = GitServer(root, "unused")
    repo = server.add("bench")
    repo.commit({path(i): note(i) for i in range(args.files)} | {"tools/build.sh": "echo build\n"}, "first")
    settings = Settings(
        _env_file=None,
        database_url=args.database_url or os.environ.get("DATABASE_URL"),
        data_dir=CACHE_DIR / "git-sync-db",
        git_allow_private=True,  # the repository is served on 127.0.0.1
        job_poll_seconds=0.05,
        run_worker=False,
    )
    app = await Archivist.open(settings)
    header = f"| {'step':<44} | {'wall s':>7} | {'status':<9} | created | updated | deleted | embedded |"
    rows = [header, "".join("|" if c == "|" else "-" for c in header)]
    try:
        config, _ = await app.git.bind(
            server.url("bench"), title=f"bench-git-sync-{os.getpid()}", include_patterns=["docs/**"]
        )
        job, seconds = await timed_sync(app, config.source_id)
        rows.append(row(f"first sync (clone) of {args.files} files", job, seconds))
        job, seconds = await timed_sync(app, config.source_id)
        rows.append(row(f"re-sync, {args.files} files unchanged", job, seconds))
        repo.commit({path(i): note(i, "Edited.\n") for i in range(args.changed)}, "edit")
        job, seconds = await timed_sync(app, config.source_id)
        rows.append(row(f"re-sync, {args.changed} files changed", job, seconds))
        repo.commit({"tools/build.sh": "echo build twice\n"}, "outside the patterns")
        job, seconds = await timed_sync(app, config.source_id)
        rows.append(row("re-sync, a commit outside the patterns", job, seconds))
        await app.sources.delete(config.source_id)
        shutil.rmtree(config.directory(settings.data_dir), ignore_errors=True)
    finally:
        await app.close()
        server.close()
    print("\n".join(rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--changed", type=int, default=10)
    parser.add_argument("--database-url", default=None)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(main(parser.parse_args()))
