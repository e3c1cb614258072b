"""Folder sync: how long a re-sync of an unchanged folder takes (target: 1,000 files in under 5 s).

    nice -n 10 .venv/bin/python bench/sync.py --files 1000 [--changed 10]

Writes `--files` small markdown files under bench/.cache/sync-files, binds them to a folder source and
syncs it once (every file new: parsed, chunked, embedded). Then it times, from queueing the job to its
completion with an in-process worker (as `archivist sync` runs it): a re-sync with nothing changed
(every file skipped on size + mtime, nothing read), and a re-sync after `--changed` files were
rewritten. The database is DATABASE_URL when set, else an embedded PostgreSQL under
bench/.cache/sync-db; the source is deleted afterwards.
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
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist, run_worker  # noqa: E402
from services.core.settings import Settings  # noqa: E402

WORDS = "river stone lantern orchard copper meadow harbor signal timber glacier violet ember".split()


def note(i: int) -> str:
    words = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(60))
    return f"# Note {i}\n\nNote number {i} is about {WORDS[i % len(WORDS)]}. {words}\n"


async def timed_sync(app: Archivist, source_id: object) -> tuple[CrawlJob, float]:
    start = time.perf_counter()
    started = await app.sync.queue(source_id)
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(app, stop, "bench-sync"))
    try:
        job = await app.jobs.wait(started.job.id, 3600, interval=0.05)
    finally:
        stop.set()
        await worker
    return job, time.perf_counter() - start


def line(label: str, job: CrawlJob, seconds: float) -> str:
    return (
        f"{label}: {seconds:.2f} s wall, {job.status}; created {job.documents_created}, updated "
        f"{job.documents_updated}, unchanged {job.documents_unchanged}, deleted {job.documents_deleted}, "
        f"chunks embedded {job.chunks_embedded}"
    )


async def main(args: argparse.Namespace) -> None:
    folder = CACHE_DIR / "sync-files"
    shutil.rmtree(folder, ignore_errors=True)
    for i in range(args.files):
        path = folder / f"group{i % 10}" / f"note{i:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(note(i))
    settings = Settings(
        _env_file=None,
        database_url=args.database_url or os.environ.get("DATABASE_URL"),
        data_dir=CACHE_DIR / "sync-db",
        allowed_paths=[CACHE_DIR],
        job_poll_seconds=0.05,
        run_worker=False,
    )
    app = await Archivist.open(settings)
    try:
        config, _ = await app.sync.bind(str(folder), title=f"bench-sync-{os.getpid()}")
        job, seconds = await timed_sync(app, config.source_id)
        print(line(f"first sync of {args.files} files", job, seconds))
        job, seconds = await timed_sync(app, config.source_id)
        print(line(f"re-sync of {args.files} unchanged files", job, seconds))
        for i in range(args.changed):
            (folder / f"group{i % 10}" / f"note{i:05d}.md").write_text(note(i) + "\nEdited.\n")
        job, seconds = await timed_sync(app, config.source_id)
        print(line(f"re-sync with {args.changed} files changed", job, seconds))
        await app.sources.delete(config.source_id)
    finally:
        await app.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--changed", type=int, default=10)
    parser.add_argument("--database-url", default=None)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    with use_scope(Scope.owner()):  # a benchmark runs as the local owner
        asyncio.run(main(parser.parse_args()))
