"""`archivist sync SOURCE` and `archivist sync --git URL`: queue a sync, run it in-process, show progress."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from services.errors import NotFound
from services.worker import run_worker

if TYPE_CHECKING:
    from services.app import Archivist


async def sync_command(
    app: Archivist,
    source: str,
    title: str | None = None,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    recursive: bool | None = None,
) -> None:
    """SOURCE is a directory (bound to a folder source on first use), or a folder or git source's id or title."""
    if Path(source).expanduser().is_dir():
        config, _ = await app.sync.bind(source, None, title, include, exclude, recursive)
    else:
        try:
            config = await app.sync.find(source)
        except NotFound as missing:
            try:
                git = await app.git.find(source)
            except NotFound:
                raise missing from None
            started = await app.git.queue(git.source_id)
            await follow(app, started.job.id, f"{git.url} ({git.ref})")
            return
    started = await app.sync.queue(config.source_id)
    await follow(app, started.job.id, config.path)


async def git_sync_command(
    app: Archivist,
    url: str,
    ref: str | None = None,
    title: str | None = None,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    auth_env: str | None = None,
    browse_url: str | None = None,
) -> None:
    """`archivist sync --git URL`: bind the repository (a new source on first use, the same one after) and sync it."""
    started = await app.git.sync(url, None, title, ref, include, exclude, auth_env, browse_url)
    await follow(app, started.job.id, f"{url} ({ref or 'HEAD'})")


async def follow(app: Archivist, job_id: Any, label: str) -> None:
    """Run a queued sync with an in-process worker, showing a progress bar, then print the outcome."""
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(app, stop))
    bar = tqdm(desc="syncing", unit="file", file=sys.stderr)

    async def show(job: Any) -> None:
        bar.total = job.pages_crawled + job.pages_failed + job.pages_skipped + job.pages_pending
        bar.n = job.pages_crawled + job.pages_failed + job.pages_skipped
        bar.set_postfix(new=job.documents_created, updated=job.documents_updated, refresh=False)
        bar.refresh()

    try:
        job = await app.jobs.wait(job_id, float("inf"), on_progress=show, interval=0.2)
        await show(job)
    except (KeyboardInterrupt, asyncio.CancelledError):
        job, _ = await app.jobs.cancel(job_id)
    finally:
        bar.close()
        stop.set()
        await asyncio.gather(worker, return_exceptions=True)
    print(f"sync {job.id} of {label}: {job.status}")
    print(
        f"{job.documents_created} created, {job.documents_updated} updated, {job.documents_unchanged} unchanged, "
        f"{job.documents_deleted} deleted, {job.pages_failed} failed, {job.chunks_embedded} chunks embedded"
    )
    for message in [job.error, *job.warnings]:
        if message:
            print(message, file=sys.stderr)
