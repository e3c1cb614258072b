"""Chaos scenarios for the disk under the embedded PostgreSQL: its data directory on a small tmpfs that
is filled up (disk full), then remounted read-only after a crash of the database (read-only disk).
Every answer must be success or UNAVAILABLE naming the directory; the server heals when space or
write access returns. Needs root (mount); without it the rows say so and are not held."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
from mcp import Client

from bench.chaos_lib import Server, base_env, row, tool
from services.core.supervisor import read_pid


def mount(*args: str) -> str | None:
    """Run mount/umount; None on success, else its error text."""
    done = subprocess.run(list(args), capture_output=True, text=True)
    return None if done.returncode == 0 else (done.stderr or done.stdout).strip()[:200]


def fill(path: Path) -> int:
    """Write zeros to `path` until the file system is full (1 MB, then 4 KB blocks); returns the bytes written."""
    written = 0
    with open(path, "wb", buffering=0) as out:
        for size in (1 << 20, 4096):
            block = b"\0" * size
            with contextlib.suppress(OSError):
                while True:
                    written += out.write(block) or 0  # raises ENOSPC once nothing fits
    return written


async def probe(client: Client, mark: str, i: int) -> dict[str, Any]:
    """One write (a new document) and one read (a search); returns the write's reply."""
    content = f"Disk probe {mark} {i}: " + " ".join(f"token{mark}{i}x{k}" for k in range(400))
    reply, _ = await tool(client, "manage_document", action="create", title=f"Disk {mark}", content=content)
    search, _ = await tool(client, "search_knowledge_base", query=f"disk probe {mark}")
    return {"write": reply, "read": search}


def judge(replies: list[dict[str, Any]], directory: Path) -> tuple[dict[str, int], int, int]:
    """(answer codes, answers that are neither success nor UNAVAILABLE naming `directory`, INTERNAL count)."""
    codes: dict[str, int] = {}
    bad = internal = 0
    for pair in replies:
        for reply in pair.values():
            code = "ok" if reply["success"] else reply["error_code"]
            codes[code] = codes.get(code, 0) + 1
            internal += code == "INTERNAL"
            if not reply["success"] and not (
                code == "UNAVAILABLE" and reply["retryable"] and str(directory) in reply["suggestion"]
            ):
                bad += 1
    return codes, bad, internal


async def heal_time(client: Client, mark: str, limit: float = 30) -> float | None:
    """Seconds from now until a small write that succeeds was sent (its own duration not counted)."""
    started = time.monotonic()
    i = 0
    while time.monotonic() - started < limit:
        i += 1
        sent = time.monotonic()
        reply, _ = await tool(client, "manage_document", action="create", title=f"Disk {mark}", content=f"{mark} {i}")
        if reply["success"]:
            return sent - started
        await asyncio.sleep(0.3)
    return None


def stop_postgres(pgdata: Path) -> None:
    pid = read_pid(pgdata)
    if pid and psutil.pid_exists(pid):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).wait(15)


async def disk_faults(work: Path) -> None:
    disk = work / "disk"
    disk.mkdir()
    problem = mount("mount", "-t", "tmpfs", "-o", "size=160m,mode=0777", "tmpfs", str(disk))
    if problem:
        row("disk full / read-only data directory", f"not run: cannot mount a tmpfs ({problem})", False)
        return
    data = disk / "data"
    pgdata = data / "pgdata"
    server = Server(base_env(data, work))
    try:
        await server.start()
        async with Client(f"{server.url}/mcp") as client:
            assert (await probe(client, "before", 0))["write"]["success"]
            filled = fill(disk / "filler")
            replies = [await probe(client, "full", i) for i in range(6)]
            codes, bad, internal = judge(replies, pgdata)
            (disk / "filler").unlink()
            healed = await heal_time(client, "freed")
            row("disk full (tmpfs 160 MB, filled)",
                f"{filled >> 20} MB filler; answers {codes}; {bad} not UNAVAILABLE naming {pgdata.name}/; "
                f"server up: {server.alive}; healed {healed if healed is None else round(healed, 1)} s after freeing",
                bad == 0 and internal == 0 and codes.get("UNAVAILABLE", 0) > 0 and server.alive
                and healed is not None and healed <= 10)  # fmt: skip
            pid = read_pid(pgdata)
            assert pid is not None
            os.kill(pid, signal.SIGKILL)  # the database crashes and its disk comes back read-only
            deadline = time.monotonic() + 15
            while (problem := mount("mount", "-o", "remount,ro", str(disk))) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            if problem:
                row("read-only data directory", f"not run: remount ro failed ({problem})", False)
                return
            await asyncio.sleep(2)
            replies = [await probe(client, "ro", i) for i in range(4)]
            codes, bad, internal = judge(replies, pgdata)
            named = any("read-only" in r["write"].get("error", "") for r in replies)
            assert mount("mount", "-o", "remount,rw", str(disk)) is None
            healed = await heal_time(client, "rw")
            row("read-only data directory (remount ro after a kill -9)",
                f"answers {codes}; {bad} not UNAVAILABLE naming {pgdata.name}/; says read-only: {named}; "
                f"server up: {server.alive}; healed {healed if healed is None else round(healed, 1)} s after "
                f"remount rw", bad == 0 and internal == 0 and named and server.alive
                and healed is not None and healed <= 10)  # fmt: skip
    finally:
        server.stop()
        mount("mount", "-o", "remount,rw", str(disk))
        stop_postgres(pgdata)
        if mount("umount", str(disk)):
            mount("umount", "-l", str(disk))
