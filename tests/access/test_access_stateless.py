"""Stateless HTTP: two server processes on one database behind a (client-side) round-robin balancer
behave as one: every request may land on either, tokens, rate limits and revocation hold across both."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.access.test_access_http import HEADERS, INIT
from tests.e2e.test_e2e import ARCHIVIST, free_port, server_env, wait_for_port
from tests.support.mcp_helpers import call, err, ok


class RoundRobin(httpx2.AsyncHTTPTransport):
    """Sends each request to the next of `ports` in turn, as a load balancer without affinity would."""

    def __init__(self, ports: list[int]) -> None:
        super().__init__()
        self.ports = ports
        self.turn = 0
        self.hits: Counter[int] = Counter()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = self.ports[self.turn % len(self.ports)]
        self.turn += 1
        self.hits[port] += 1
        request.url = request.url.copy_with(port=port)
        request.headers["host"] = f"127.0.0.1:{port}"
        return await super().handle_async_request(request)


async def test_two_stateless_servers_behave_as_one(app, database_url: str, files_dir: Path) -> None:
    _, secret = await app.tokens.create("balanced", [], rate_per_minute=8)
    env = server_env(database_url, files_dir)
    ports = [free_port(), free_port()]
    procs = [
        subprocess.Popen(
            [ARCHIVIST, "serve", "--http", "--stateless", "--port", str(ports[0]), "--no-worker"],
            env=env,
            stdout=subprocess.DEVNULL,
        ),
        subprocess.Popen(  # the setting instead of the flag
            [ARCHIVIST, "serve", "--http", "--port", str(ports[1]), "--no-worker"],
            env={**env, "ARCHIVIST_STATELESS_HTTP": "true"},
            stdout=subprocess.DEVNULL,
        ),
    ]
    try:
        for port, proc in zip(ports, procs, strict=True):
            await wait_for_port(port, proc)
        balancer = RoundRobin(ports)
        http = httpx2.AsyncClient(transport=balancer, headers={"Authorization": f"Bearer {secret}"})
        async with Client(streamable_http_client(f"http://127.0.0.1:{ports[0]}/mcp", http_client=http)) as c:
            made = (await ok(c, "manage_source", action="create", title="Balanced"))["source"]["id"]
            for _ in range(3):
                got = await ok(c, "manage_source", action="get", source_id=made)  # seen by both servers
                assert got["source"]["title"] == "Balanced"
                await ok(c, "manage_source", action="list")
            await ok(c, "manage_source", action="list")  # the 8th call
            assert min(balancer.hits[p] for p in ports) >= 4, balancer.hits
            refused = await err(c, "manage_source", "RATE_LIMITED", action="list")  # 8 per minute, shared
            assert refused["retryable"] is True and refused["retry_after_seconds"] > 0
            await app.db.pool.execute(
                "UPDATE rate_buckets SET updated_at = updated_at - interval '8 seconds' WHERE key = 'token:balanced'"
            )
            assert (await call(c, "manage_source", action="list"))["success"] is True
        await app.tokens.revoke("balanced")
        async with httpx.AsyncClient() as raw:
            for port in ports:
                h = {**HEADERS, "Authorization": f"Bearer {secret}"}
                assert (await raw.post(f"http://127.0.0.1:{port}/mcp", json=INIT, headers=h)).status_code == 401
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=15)
