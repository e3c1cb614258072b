"""Issue 10: the embedded PostgreSQL is killed (SIGKILL) under a loop of searches through the real MCP
client over HTTP: every answer is success or a retryable UNAVAILABLE, and Archivist heals by itself."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
from mcp import Client

from services.core.supervisor import clear_stale_pid, postmaster_alive, read_pid
from tests.conftest import copy_data_dir
from tests.support.mcp_helpers import call, ok
from tests.support.served import ServedHttp


def test_stale_postmaster_pid_is_cleared(tmp_path: Path) -> None:
    pgdata = tmp_path / "pgdata"
    pgdata.mkdir()
    pid_file = pgdata / "postmaster.pid"
    dead = subprocess.Popen(["true"])
    dead.wait()
    pid_file.write_text(f"{dead.pid}\n{pgdata}\n0\n\n\n\n\nready\n")
    assert not postmaster_alive(pgdata)
    assert clear_stale_pid(pgdata) and not pid_file.exists()
    pid_file.write_text(f"{os.getpid()}\n{pgdata}\n0\n\n\n\n\nready\n")  # a live pid, but not PostgreSQL
    assert clear_stale_pid(pgdata) and not pid_file.exists()
    assert not clear_stale_pid(pgdata)


async def test_killed_embedded_postgres_heals_under_searches(tmp_path: Path, started_data_dir: Path) -> None:
    data_dir = copy_data_dir(started_data_dir, tmp_path / "data")  # initialized once per session: not what is tested
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHIVIST_") and k != "DATABASE_URL"}
    env.update(ARCHIVIST_DATA_DIR=str(data_dir), ARCHIVIST_LOG_LEVEL="WARNING", HF_HUB_OFFLINE="1")
    server = ServedHttp(env, "--no-worker")  # in a thread (tests/support/served.py); its PostgreSQL a process
    port = server.port
    try:
        await asyncio.to_thread(server.start)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            await ok(client, "manage_document", action="create", title="Heal", content="Otters hold hands asleep.")
            await ok(client, "search_knowledge_base", query="otters")
            pgdata = data_dir / "pgdata"
            old_pid = read_pid(pgdata)
            assert old_pid and postmaster_alive(pgdata)
            os.kill(old_pid, signal.SIGKILL)
            killed_at = time.monotonic()
            replies, healed_after = [], None
            while time.monotonic() - killed_at < 30:
                reply = await asyncio.wait_for(call(client, "search_knowledge_base", query="otters"), 15)
                replies.append(reply)
                if reply["success"]:
                    if read_pid(pgdata) != old_pid:
                        healed_after = time.monotonic() - killed_at
                        break
                else:
                    assert reply["error_code"] == "UNAVAILABLE" and reply["retryable"], reply
                    assert "retry" in reply["suggestion"].lower()
                await asyncio.sleep(0.2)
            print(f"healed after {healed_after} s; replies: {[r.get('error_code', 'ok') for r in replies]}")
            assert healed_after is not None and healed_after <= 10, (healed_after, replies[-3:])
            assert not any(r.get("error_code") == "INTERNAL" for r in replies)
            found = await ok(client, "search_knowledge_base", query="otters hold hands")
            assert "Otters" in found["results"][0]["text"]
            async with httpx.AsyncClient() as http:
                # the supervisor counts its restart when pg_ctl returns, which can be just after the
                # restarted server answered the search above
                for _ in range(50):
                    health = await http.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
                    if health.json()["database"].get("restarts", 0) >= 1:
                        break
                    await asyncio.sleep(0.1)
            assert health.status_code == 200 and health.json()["database"]["ok"] is True
            assert health.json()["database"]["restarts"] >= 1
    finally:
        await asyncio.to_thread(server.stop)
        pid = read_pid(data_dir / "pgdata")
        if pid and postmaster_alive(data_dir / "pgdata"):
            os.kill(pid, signal.SIGTERM)
