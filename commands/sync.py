"""`archivist sync SOURCE` and `archivist sync --git URL`: queue a sync, run it in-process, show progress.

A stop signal hands the running sync back to the queue (the next worker finishes it)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commands.jobs import exit_if_failed, follow, with_worker
from commands.output import note, progress_bar, say, usage
from models.jobs import WARNING_STATUSES, GitSyncRequest
from services.core.errors import NotFound

if TYPE_CHECKING:
    from services.app import Archivist


def add_sync_command(sub: Any) -> None:
    sync = sub.add_parser(
        "sync",
        help="sync a folder or git source, with a progress bar",
        description="Bring a folder source up to date with its directory, or a git source with its repository: "
        "new and changed files are ingested, deleted files removed. A directory or repository seen for the "
        "first time becomes a new source.",
        epilog="examples:\n  archivist sync ~/notes --title Notes\n  archivist sync Notes\n"
        "  archivist sync --git https://github.com/encode/starlette --ref master --include 'docs/**'",
    )
    sync.add_argument(
        "source", nargs="?", default=None, help="folder or git source (id or title), or a directory to bind"
    )
    sync.add_argument("--git", default=None, metavar="URL", help="sync this git repository (bound on first use)")
    sync.add_argument("--ref", default=None, help="with --git: branch, tag or commit (default: the remote's HEAD)")
    sync.add_argument(
        "--auth-env", default=None, metavar="VAR", help="with --git: environment variable holding an access token"
    )
    sync.add_argument("--browse-url", default=None, metavar="URL", help="with --git: web address to link documents to")
    sync.add_argument("--title", default=None, help="title of a new source")
    sync.add_argument("--include", action="append", default=None, metavar="GLOB", help="files to keep (repeatable)")
    sync.add_argument("--exclude", action="append", default=None, metavar="GLOB", help="files to skip (repeatable)")
    sync.add_argument("--no-recursive", action="store_true", help="only the directory's top level")


async def queue_sync(app: Archivist, args: argparse.Namespace) -> tuple[Any, str]:
    """Queue the sync the arguments name; returns the started job and a label for the outcome line."""
    if args.git:
        request = GitSyncRequest(
            git_url=args.git,
            title=args.title,
            ref=args.ref,
            include_patterns=args.include,
            exclude_patterns=args.exclude,
            auth_env=args.auth_env,
            browse_url=args.browse_url,
        )
        started = await app.refresh.sync(request)
        return started, f"{args.git} ({args.ref or 'HEAD'})"
    if not args.source:
        usage("name a folder source, a directory, or --git URL", "See: archivist sync --help")
    if Path(args.source).expanduser().is_dir():
        recursive = False if args.no_recursive else None
        config, _ = await app.sync.bind(args.source, None, args.title, args.include, args.exclude, recursive)
        return await app.sync.queue(config.source_id), config.path
    try:
        config = await app.sync.find(args.source)
    except NotFound as missing:
        try:
            git = await app.git.find(args.source)
        except NotFound:
            raise missing from None
        return await app.git.queue(git.source_id), f"{git.url} ({git.ref})"
    return await app.sync.queue(config.source_id), config.path


async def cli_sync(app: Archivist, args: argparse.Namespace, stop: asyncio.Event) -> None:
    started, label = await queue_sync(app, args)
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
    say(f"sync {job.id} of {label}: {job.status}")
    if job.status in WARNING_STATUSES:
        note(f"warning: sync {job.id} completed with errors: {job.pages_failed} files failed (listed below)")
    say(
        f"{job.documents_created} created, {job.documents_updated} updated, {job.documents_unchanged} unchanged, "
        f"{job.documents_deleted} deleted, {job.pages_failed} failed, {job.chunks_embedded} chunks embedded"
    )
    job = await app.jobs.get(job.id)  # with its most recent file errors
    for message in [job.error, *job.warnings]:
        if message:
            note(message)
    for error in job.recent_errors:
        note(f"failed: {error.url}: {error.error}")
    exit_if_failed(job)
