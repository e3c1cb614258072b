"""`serve --watch` through a real MCP client: bind a folder with crawl_website(action='sync'), a new file
is found by search within seconds, and a restarted server catches up with files added while it was down."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from mcp import Client

from server import build_server
from services.app import Runtime
from tests.conftest import make_settings
from tests.support.mcp_helpers import client_in_own_task, err, ok

WAIT_SECONDS = 30.0


def watch_settings(database_url: str, files_dir: Path) -> Any:
    return make_settings(
        database_url,
        files_dir,
        run_worker=True,
        watch_folders=True,
        watch_debounce_ms=300,
        job_poll_seconds=0.1,
        job_heartbeat_seconds=0.5,
    )


async def found(client: Client, query: str, source_id: str, needle: str) -> float:
    """Seconds until a search of the source returns a chunk containing `needle` (fails after WAIT_SECONDS)."""
    start = time.monotonic()
    while time.monotonic() - start < WAIT_SECONDS:
        payload = await ok(client, "search_knowledge_base", query=query, source_id=source_id, match_count=3)
        if any(needle in r["text"] for r in payload["results"]):
            return time.monotonic() - start
        await asyncio.sleep(0.3)
    raise AssertionError(f"{needle!r} not found within {WAIT_SECONDS} s")


async def test_watch_picks_up_new_files_and_restart_catches_up(
    database_url: str, files_dir: Path, embedder: Any
) -> None:
    folder = files_dir / "watched"
    folder.mkdir()
    (folder / "start.md").write_text("# Start\n\nThe first note in the watched folder.\n")
    settings = watch_settings(database_url, files_dir)
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder))
    async with client_in_own_task(server) as client:
        await err(client, "crawl_website", "INVALID_ARGUMENT", action="sync")
        await err(client, "crawl_website", "PERMISSION_DENIED", action="sync", folder_path="/etc")
        bound = await ok(client, "crawl_website", action="sync", folder_path=str(folder), wait_seconds=20)
        assert bound["source_created"] and bound["crawl_job"]["kind"] == "sync", bound
        assert bound["crawl_job"]["status"] == "completed" and bound["crawl_job"]["documents_created"] == 1, bound
        source_id = bound["source_id"]
        listed = await ok(client, "crawl_website", action="list", source_id=source_id)
        assert listed["jobs"][0]["kind"] == "sync"
        (folder / "zebra.md").write_text("# Zebras\n\nZebra stripes confuse biting horseflies.\n")
        seconds = await found(client, "why do zebras have stripes", source_id, "horseflies")
        assert seconds < WAIT_SECONDS
        again = await ok(client, "crawl_website", action="recrawl", source_id=source_id, wait_seconds=20)
        assert again["crawl_job"]["kind"] == "sync" and again["crawl_job"]["documents_unchanged"] == 2, again

    (folder / "yak.md").write_text("# Yaks\n\nYaks grunt instead of mooing.\n")  # added while the server is down
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder))
    async with client_in_own_task(server) as client:
        await found(client, "which animal grunts", source_id, "grunt")
        source = await ok(client, "manage_source", action="get", source_id=source_id)
        assert source["source"]["source_type"] == "folder" and source["source"]["documents_count"] == 3
