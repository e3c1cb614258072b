"""`archivist sync SOURCE`: queue a sync, run it with an in-process worker and show a progress bar.

A stop signal hands the running sync back to the queue (the next worker finishes it)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from commands.jobs import follow, with_worker
from commands.output import note, progress_bar, say


def add_sync_command(sub: Any) -> None:
    sync = sub.add_parser(
        "sync",
        help="sync a folder source with its directory, with a progress bar",
        description="Bring a folder source up to date with its directory: new and changed files are "
        "ingested, deleted files removed. A directory seen for the first time becomes a folder source.",
        epilog="examples:\n  archivist sync ~/notes --title Notes\n  archivist sync Notes",
    )
    sync.add_argument("source", help="folder source id or title, or a directory (bound to a new source if needed)")
    sync.add_argument("--title", default=None, help="title of a new folder source")
    sync.add_argument("--include", action="append", default=None, metavar="GLOB", help="files to keep (repeatable)")
    sync.add_argument("--exclude", action="append", default=None, metavar="GLOB", help="files to skip (repeatable)")
    sync.add_argument("--no-recursive", action="store_true", help="only the directory's top level")


async def cli_sync(app: Any, args: argparse.Namespace, stop: asyncio.Event) -> None:
    """SOURCE is a directory (bound to a folder source on first use), or a folder source's id or title."""
    recursive = False if args.no_recursive else None
    if Path(args.source).expanduser().is_dir():
        config, _ = await app.sync.bind(args.source, None, args.title, args.include, args.exclude, recursive)
    else:
        config = await app.sync.find(args.source)
    started = await app.sync.queue(config.source_id)
    with progress_bar("files") as bar:
        task = bar.add_task("syncing", total=None, extra="")

        async def show(job: Any) -> None:
            total = job.pages_crawled + job.pages_failed + job.pages_skipped + job.pages_pending
            done = job.pages_crawled + job.pages_failed + job.pages_skipped
            extra = f"{job.documents_created} new, {job.documents_updated} updated"
            bar.update(task, total=total or None, completed=done, extra=extra)

        job, stopped = await with_worker(app, True, lambda: follow(app, started.job.id, stop, show, interval=0.2))
    if stopped:
        job = await app.jobs.get(started.job.id)
        note(f"stopped: sync {job.id} is {job.status}; `archivist worker` or `archivist serve` finishes it")
        return
    say(f"sync {job.id} of {config.path}: {job.status}")
    say(
        f"{job.documents_created} created, {job.documents_updated} updated, {job.documents_unchanged} unchanged, "
        f"{job.documents_deleted} deleted, {job.pages_failed} failed, {job.chunks_embedded} chunks embedded"
    )
    for message in [job.error, *job.warnings]:
        if message:
            note(message)
