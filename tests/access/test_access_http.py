"""Bearer tokens over real streamable HTTP (`archivist serve --http` in a thread, the SDK client); a
non-loopback bind without tokens refused by a real process."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.test_e2e import ARCHIVIST, free_port, server_env
from tests.support.mcp_helpers import err, ok
from tests.support.served import served_async

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def authed(url: str, secret: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"})
    return Client(streamable_http_client(url, http_client=http))


@pytest.mark.usefixtures("owner")
async def test_tokens_profiles_and_refusal(app, database_url: str, files_dir: Path) -> None:
    env = server_env(database_url, files_dir)
    # no token yet: a non-loopback bind refuses to start and says how to create one
    refused = subprocess.run(
        [ARCHIVIST, "serve", "--http", "--host", "0.0.0.0", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0 and "archivist token create" in refused.stderr

    a = await app.sources.create(title="HTTP A", source_type="api")
    b = await app.sources.create(title="HTTP B", source_type="api")
    await app.profiles.create("http-a", "A docs", [a.id])
    await app.profiles.create("http-b", "B docs", [b.id], read_only=True)
    _, sa = await app.tokens.create("tok-a", ["http-a"])
    _, sb = await app.tokens.create("tok-b", ["http-b"])

    async with served_async(env) as base:
        url = f"{base}/mcp"
        async with httpx.AsyncClient() as http:
            assert (await http.post(url, json=INIT, headers=HEADERS)).status_code == 401
            bad = {**HEADERS, "Authorization": "Bearer arch_wrong"}
            assert (await http.post(url, json=INIT, headers=bad)).status_code == 401
            good = {**HEADERS, "Authorization": f"Bearer {sa}", "Host": "evil.example:80"}
            assert (await http.post(url, json=INIT, headers=good)).status_code in (400, 403, 421)
        async with authed(url, sa) as ca:
            listed = await ok(ca, "manage_source", action="list")
            assert {s["id"] for s in listed["sources"]} == {str(a.id)}
            await ok(ca, "manage_source", action="get", source_id=str(a.id))
            missing = await err(ca, "manage_source", "NOT_FOUND", action="get", source_id=str(b.id))
            assert str(b.id) in missing["error"]
            await ok(ca, "manage_source", action="update", source_id=str(a.id), description="x")
        async with authed(url, sb) as cb:
            await err(cb, "manage_source", "NOT_FOUND", action="get", source_id=str(a.id))
            await err(cb, "manage_source", "PERMISSION_DENIED", action="update", source_id=str(b.id), description="y")
            await err(cb, "manage_source", "PERMISSION_DENIED", action="delete", source_id=str(b.id))
        await app.tokens.revoke("tok-a")
        async with httpx.AsyncClient() as http:
            h = {**HEADERS, "Authorization": f"Bearer {sa}"}
            assert (await http.post(url, json=INIT, headers=h)).status_code == 401
        for _ in range(40):  # the server writes its audit batches off the request path
            rows = await app.db.pool.fetch("SELECT who, error_code FROM audit_log WHERE who IN ('tok-a', 'tok-b')")
            if len(rows) >= 7:
                break
            await asyncio.sleep(0.1)
        assert len(rows) == 7
        assert sum(1 for r in rows if r["error_code"] == "PERMISSION_DENIED") == 2
