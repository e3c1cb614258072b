"""Issue 10: a full and a read-only data directory. The embedded PostgreSQL lives on a small tmpfs that
is filled up, then (after a kill -9 of the database) remounted read-only: tool calls through the real MCP
client answer UNAVAILABLE naming the directory, reads keep working while the disk is full, and calls
succeed again once space or write access returns. Needs root (mount); skipped otherwise."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from server import build_server
from services.app import Runtime
from services.core.errors import disk_problem, service_error_from
from services.core.settings import Settings
from services.core.supervisor import read_pid
from tests.support.mcp_helpers import call, client_in_own_task, ok


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = run("mount", "-t", "tmpfs", "-o", "size=96m,mode=0777", "tmpfs", str(disk))
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        run("mount", "-o", "remount,rw", str(disk))
        pid = read_pid(disk / "data" / "pgdata")
        if pid and psutil.pid_exists(pid):
            with contextlib.suppress(OSError, psutil.Error):
                os.kill(pid, signal.SIGTERM)
                psutil.Process(pid).wait(15)
        if run("umount", str(disk)).returncode:
            run("umount", "-l", str(disk))


def fill(path: Path) -> None:
    """Write zeros until the file system is full."""
    with open(path, "wb", buffering=0) as out:
        for block in (b"\0" * (1 << 20), b"\0" * 4096):
            with contextlib.suppress(OSError):
                while True:
                    out.write(block)


def names_the_directory(reply: dict[str, Any], pgdata: Path, problem: str) -> bool:
    return (
        reply["error_code"] == "UNAVAILABLE"
        and reply["retryable"]
        and str(pgdata) in reply["suggestion"]
        and problem in reply["error"]
    )


async def until_written(client: Any, mark: str, limit: float = 15) -> float:
    started = time.monotonic()
    while True:
        reply = await call(client, "manage_document", action="create", title="Disk", content=f"Back: {mark}.")
        if reply["success"]:
            return time.monotonic() - started
        assert reply["error_code"] == "UNAVAILABLE", reply
        assert time.monotonic() - started < limit, reply
        await asyncio.sleep(0.3)


async def test_full_and_read_only_data_directory(tmpfs: Path, tmp_path: Path, embedder: Any) -> None:
    settings = Settings(
        _env_file=None, database_url=None, data_dir=tmpfs / "data", allowed_paths=[tmp_path], run_worker=False
    )
    pgdata = tmpfs / "data" / "pgdata"
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as client:
        await ok(client, "manage_document", action="create", title="Disk", content="Otters sleep holding hands.")

        fill(tmpfs / "filler")
        assert (disk_problem(pgdata) or "").startswith("is full")
        reply = await call(client, "manage_document", action="create", title="Disk", content="Kelp. " * 3000)
        assert not reply["success"] and names_the_directory(reply, pgdata, "full"), reply
        found = await ok(client, "search_knowledge_base", query="otters holding hands")  # reads still work
        assert "Otters" in found["results"][0]["text"]
        (tmpfs / "filler").unlink()
        assert await until_written(client, "space") < 10

        pid = read_pid(pgdata)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # the database crashes; its disk comes back read-only
        deadline = time.monotonic() + 15
        while run("mount", "-o", "remount,ro", str(tmpfs)).returncode:
            assert time.monotonic() < deadline, "remount ro kept failing"
            await asyncio.sleep(0.1)
        reply = await call(client, "manage_document", action="create", title="Disk", content="Moss.")
        assert not reply["success"] and names_the_directory(reply, pgdata, "read-only"), reply
        reply = await call(client, "search_knowledge_base", query="otters")
        assert not reply["success"] and names_the_directory(reply, pgdata, "read-only"), reply
        assert run("mount", "-o", "remount,rw", str(tmpfs)).returncode == 0
        assert await until_written(client, "write access") < 10


def test_disk_full_error_from_postgres_names_the_watched_directory(tmp_path: Path) -> None:
    import asyncpg

    from services.core.errors import watch_data_dir

    watch_data_dir(tmp_path / "pgdata")
    try:
        mapped = service_error_from(asyncpg.exceptions.DiskFullError("could not extend file"))
        assert mapped is not None and mapped.code == "UNAVAILABLE" and str(tmp_path / "pgdata") in mapped.suggestion
        assert disk_problem(tmp_path / "pgdata" / "not-yet-created") is None  # a writable disk with room
    finally:
        watch_data_dir(None)
    mapped = service_error_from(asyncpg.exceptions.DiskFullError("could not extend file"))
    assert mapped is not None and "data_directory" in mapped.suggestion
