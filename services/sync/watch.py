"""Watch folder sources (watchfiles) and queue a sync when their files change.

On start every folder source is synced once (catching up with what changed while nobody watched;
unchanged files cost a stat each). Changes are debounced by watchfiles (`watch_debounce_ms` of quiet
before a batch is reported). Folder sources bound later are watched at once when bound in this process,
else within REFRESH_SECONDS; whoever binds a folder (the sync action, `archivist sync`) queues its first sync.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from watchfiles import Change, awatch

from services.access.scope import server_scope, use_scope
from services.core.errors import ServiceError
from services.jobs.run import wait_any
from services.sync import SyncService
from services.sync.scan import FolderConfig

logger = logging.getLogger(__name__)

REFRESH_SECONDS = 5.0


def sources_touched(folders: list[FolderConfig], changes: set[tuple[Change, str]]) -> set[str]:
    """Ids of the folder sources whose wanted files changed (a deleted directory touches its source)."""
    touched: set[str] = set()
    for _, raw in changes:
        path = Path(raw)
        for folder in folders:
            root = Path(folder.path)
            if not path.is_relative_to(root):
                continue
            relative = path.relative_to(root).as_posix()
            if folder.wants(relative) or not path.suffix:
                touched.add(str(folder.source_id))
    return touched


async def queue_syncs(sync: SyncService, source_ids: set[str]) -> None:
    for source_id in sorted(source_ids):
        try:
            started = await sync.queue(source_id)
            logger.info("watch: sync %s queued for source %s", started.job.id, source_id)
        except ServiceError as exc:
            logger.warning("watch: could not queue a sync of %s: %s", source_id, exc.message)


async def watch_folders(sync: SyncService, stop: asyncio.Event) -> None:
    """Until `stop`: catch up once, then sync folder sources as their files change."""
    folders = await sync.folders()
    logger.info("folder watcher started: catching up with %d folder sources", len(folders))
    await queue_syncs(sync, {str(f.source_id) for f in folders})
    while not stop.is_set():
        existing = [f for f in folders if Path(f.path).is_dir()]
        if not existing:
            await wait_any((stop, sync.bound), REFRESH_SECONDS)
            sync.bound.clear()
            folders = await sync.folders()
            continue
        logger.info("watching %d folder sources", len(existing))
        refresh = asyncio.Event()
        refresher = asyncio.create_task(_wait_for_new_folders(sync, folders, stop, refresh))
        try:
            async for changes in awatch(
                *[f.path for f in existing],
                stop_event=refresh,
                debounce=sync.settings.watch_debounce_ms,
                step=50,
                recursive=True,
            ):
                await queue_syncs(sync, sources_touched(existing, changes))
        finally:
            refresher.cancel()
            await asyncio.gather(refresher, return_exceptions=True)
        if not stop.is_set():
            folders = await sync.folders()


async def _wait_for_new_folders(
    sync: SyncService, folders: list[FolderConfig], stop: asyncio.Event, refresh: asyncio.Event
) -> None:
    """Set `refresh` when the server stops or the set of folder sources changes."""
    current = {
        (f.source_id, f.path, tuple(f.include_patterns), tuple(f.exclude_patterns), f.recursive) for f in folders
    }
    while not stop.is_set():
        await wait_any((stop, sync.bound), REFRESH_SECONDS)
        sync.bound.clear()
        try:
            latest = await sync.folders()
        except Exception as exc:  # a database hiccup: keep watching what we have
            logger.warning("watch: could not list folder sources: %s", exc)
            continue
        seen = {
            (f.source_id, f.path, tuple(f.include_patterns), tuple(f.exclude_patterns), f.recursive) for f in latest
        }
        if seen != current:
            break
    refresh.set()


async def run_watcher(sync: SyncService, stop: asyncio.Event) -> None:
    """watch_folders that logs and retries instead of dying (e.g. a watched folder vanished). The
    watcher is the owner's own (`serve --watch`): it queues syncs as the local owner."""
    with use_scope(server_scope("local")):
        await watch_until_stopped(sync, stop)


async def watch_until_stopped(sync: SyncService, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            await watch_folders(sync, stop)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("folder watcher failed; restarting in %ss", REFRESH_SECONDS)
            await wait_any((stop,), REFRESH_SECONDS)
