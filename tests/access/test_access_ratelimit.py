"""Rate limits shared by two real HTTP server processes through PostgreSQL."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.access.test_access_http import authed
from tests.e2e.test_e2e import ARCHIVIST, free_port, server_env, wait_for_port
from tests.support.mcp_helpers import call, err, ok


async def test_rate_limit_across_two_processes(app, database_url: str, files_dir: Path) -> None:
    _, secret = await app.tokens.create("limited", [], rate_per_minute=3)
    env = server_env(database_url, files_dir)
    ports = [free_port(), free_port()]
    procs = [
        subprocess.Popen([ARCHIVIST, "serve", "--http", "--port", str(p)], env=env, stdout=subprocess.DEVNULL)
        for p in ports
    ]
    try:
        for port, proc in zip(ports, procs, strict=True):
            await wait_for_port(port, proc)
        urls = [f"http://127.0.0.1:{p}/mcp" for p in ports]
        async with authed(urls[0], secret) as c1, authed(urls[1], secret) as c2:
            await ok(c1, "manage_source", action="list")
            await ok(c2, "manage_source", action="list")
            await ok(c1, "manage_source", action="list")
            refused = await err(c2, "manage_source", "RATE_LIMITED", action="list")
            assert refused["retryable"] is True and 0 < refused["retry_after_seconds"] <= 20
            # a third of a minute later the bucket has refilled one call (clock moved, not slept)
            await app.db.pool.execute(
                "UPDATE rate_buckets SET updated_at = updated_at - interval '21 seconds' WHERE key = 'token:limited'"
            )
            assert (await call(c1, "manage_source", action="list"))["success"] is True
            await err(c1, "manage_source", "RATE_LIMITED", action="list")
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=15)
