"""Supervision of the embedded PostgreSQL: a dead postmaster is restarted (with back-off) through
pgserver's own start path, and a stale postmaster.pid left by a dead process is cleared on start."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.core.errors import disk_problem

logger = logging.getLogger(__name__)


def postmaster_alive(pgdata: Path) -> bool:
    """Whether the postmaster named by pgdata/postmaster.pid is a live PostgreSQL process."""
    import psutil

    pid = read_pid(pgdata)
    if pid is None:
        return False
    try:
        process = psutil.Process(pid)
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE and "postgres" in process.name()
    except psutil.AccessDenied:
        return True  # someone else's live process: never treat it as stale
    except psutil.Error:
        return False


def read_pid(pgdata: Path) -> int | None:
    """The lock file's pid; a standalone backend (initdb, single-user mode) writes its pid negated."""
    try:
        first = (pgdata / "postmaster.pid").read_text().splitlines()[0]
        return abs(int(first.strip())) or None
    except (OSError, ValueError, IndexError):
        return None


def clear_stale_pid(pgdata: Path) -> bool:
    """Remove postmaster.pid when no live postmaster owns it (its pid dead or reused); True if removed."""
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.exists() or postmaster_alive(pgdata):
        return False
    logger.warning("removing stale %s (pid %s is not a running PostgreSQL)", pid_file, read_pid(pgdata))
    pid_file.unlink(missing_ok=True)
    return True


def restart_embedded(pgdata: Path) -> None:
    """Start the embedded server again through pgserver (same data directory, same socket)."""
    import pgserver
    from pgserver.postgres_server import PostgresServer

    clear_stale_pid(pgdata)
    server = PostgresServer._instances.get(pgdata)
    if server is None:
        pgserver.get_server(pgdata, cleanup_mode="stop")
        return
    with server._lock:
        server.ensure_postgres_running()


@dataclass
class Supervisor:
    """Checks the postmaster every `interval` seconds; restarts it with back-off (1 s doubling to 30 s)."""

    pgdata: Path
    on_restart: Any = None  # callable run after a restart (e.g. expire the pool's connections)
    interval: float = 1.0
    max_backoff: float = 30.0
    restarts: int = 0
    last_error: str | None = None
    last_restart: float | None = None
    _task: asyncio.Task[None] | None = field(default=None, repr=False)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="postgres-supervisor")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def state(self) -> dict[str, Any]:
        return {
            "supervised": True,
            "postmaster_alive": postmaster_alive(self.pgdata),
            "restarts": self.restarts,
            "last_restart_age_s": round(time.time() - self.last_restart, 1) if self.last_restart else None,
            "last_error": self.last_error,
            "data_dir_problem": disk_problem(self.pgdata),
        }

    async def _back_off(self, seconds: float, disk_fault: bool) -> None:
        """Sleep `seconds`, but when a full / read-only disk stopped the restart, try again as soon as
        the disk has room and is writable again (checked every `interval`)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await asyncio.sleep(min(self.interval, max(deadline - time.monotonic(), 0)))
            if disk_fault and disk_problem(self.pgdata) is None:
                return

    async def _run(self) -> None:
        backoff = 1.0
        while True:
            await asyncio.sleep(self.interval)
            if await asyncio.to_thread(postmaster_alive, self.pgdata):
                backoff = 1.0
                continue
            logger.warning("embedded PostgreSQL in %s is not running; restarting it", self.pgdata)
            try:
                await asyncio.to_thread(restart_embedded, self.pgdata)
            except Exception as exc:  # keep supervising: the next attempt comes after the back-off
                problem = disk_problem(self.pgdata)
                self.last_error = f"{self.pgdata} {problem}" if problem else f"{type(exc).__name__}: {exc}"[:300]
                logger.error("restarting PostgreSQL failed (%s); next try in %.0f s", self.last_error, backoff)
                await self._back_off(backoff, problem is not None)
                backoff = min(backoff * 2, self.max_backoff)
                continue
            self.restarts += 1
            self.last_restart = time.time()
            self.last_error = None
            logger.warning("embedded PostgreSQL restarted (%d restart(s) so far)", self.restarts)
            if self.on_restart is not None:
                result = self.on_restart()
                if asyncio.iscoroutine(result):
                    await result
