"""The local owner's agents are its own work: on an open loopback server (no tokens), 20 parallel
clients are not throttled as one caller. With ARCHIVIST_LOCAL_RATE_PER_MINUTE set, each MCP session
has a bucket of its own: one busy session does not throttle the next."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from mcp import Client

from tests.security.support import bearer_client, http_server
from tests.support.mcp_helpers import call

CLIENTS = 20
CALLS = 5


async def session_calls(url: str, calls: int) -> list[str | None]:
    """One MCP session making `calls` tool calls; the error code of each (None = success)."""
    async with bearer_client(url, None) as client:
        return [await error_code(client) for _ in range(calls)]


async def error_code(client: Client) -> str | None:
    reply = await call(client, "manage_source", action="list")
    return None if reply["success"] else reply["error_code"]


async def test_twenty_local_clients_are_not_throttled_as_one(app: Any, database_url: str, files_dir: Path) -> None:
    # 60 calls per minute (a small ARCHIVIST_RATE_PER_MINUTE makes a shared bucket show at 100 calls)
    async with http_server(database_url, files_dir, ARCHIVIST_RATE_PER_MINUTE="60") as url:
        codes = await asyncio.gather(*(session_calls(url, CALLS) for _ in range(CLIENTS)))
    flat = [code for session in codes for code in session]
    assert len(flat) == CLIENTS * CALLS
    assert flat.count("RATE_LIMITED") == 0, f"{flat.count('RATE_LIMITED')} of {len(flat)} calls throttled"
    assert set(flat) == {None}, set(flat)


async def test_an_owner_rate_applies_per_session(app: Any, database_url: str, files_dir: Path) -> None:
    async with http_server(database_url, files_dir, ARCHIVIST_LOCAL_RATE_PER_MINUTE="3") as url:
        busy = await session_calls(url, 5)
        fresh = await session_calls(url, 3)
    assert busy[:3] == [None, None, None] and "RATE_LIMITED" in busy[3:], busy
    assert fresh == [None, None, None], fresh  # a new session starts with a full bucket of its own
