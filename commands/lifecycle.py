"""Clean stops: SIGINT, SIGTERM and stdin EOF end every long-running command the same quiet way.

The first signal asks the work to stop (the server closes its sessions, workers hand running jobs back
to the queue); the lifespan and `Archivist.close()` then flush the audit log and stop the embedded
PostgreSQL this process started. A second signal stops at once. Nothing re-raises the signal, so the
process exits 0 without a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from server import ArchivistServer

logger = logging.getLogger("archivist")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
HTTP_GRACE_SECONDS = 3  # open streams (SSE) get this long to finish before uvicorn closes them


@contextlib.contextmanager
def on_stop_signals(first: Callable[[], object], second: Callable[[], object]) -> Iterator[None]:
    """Call `first` on the first SIGINT/SIGTERM and `second` on any later one (inside a running loop)."""
    loop = asyncio.get_running_loop()
    seen = 0

    def handle() -> None:
        nonlocal seen
        seen += 1
        (first if seen == 1 else second)()

    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, handle)
    try:
        yield
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)


async def run_stoppable(body: Callable[[asyncio.Event], Awaitable[Any]], *, graceful: bool) -> None:
    """Run `body(stop)`. A stop signal sets `stop`; a body that is not `graceful` is also cancelled
    (its `finally` blocks still run), and a second signal cancels any body."""
    stop = asyncio.Event()
    task = asyncio.ensure_future(body(stop))

    def first() -> None:
        stop.set()
        if not graceful:
            task.cancel()

    with on_stop_signals(first, task.cancel):
        try:
            await task
        except asyncio.CancelledError:
            if not stop.is_set():
                raise
            print("stopped", file=sys.stderr)


class StdinRelay:
    """Feeds the stdio transport from a pipe this process owns, copied from the real stdin by a daemon
    thread. The SDK reads stdin in a worker thread that cancellation cannot interrupt; closing our pipe
    ends its session exactly as the client's EOF does, so a signal takes the same clean path."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._source = os.dup(0)
        read_end, self._write_end = os.pipe()
        os.dup2(read_end, 0)
        os.close(read_end)
        self._closed = False
        threading.Thread(target=self._copy, name="stdin-relay", daemon=True).start()

    def _copy(self) -> None:
        while True:
            try:
                data = os.read(self._source, 65536)
            except OSError:
                data = b""
            with self._lock:
                if self._closed:
                    self._close_fd()
                    return
                if not data:
                    self._close_locked()
                    return
                try:
                    os.write(self._write_end, data)
                except OSError:
                    self._close_locked()
                    return

    def _close_locked(self) -> None:
        self._closed = True
        self._close_fd()

    def _close_fd(self) -> None:
        if self._write_end >= 0:
            os.close(self._write_end)
            self._write_end = -1

    def close(self) -> None:
        """End the session: the transport reads EOF after what was already relayed. Never blocks the
        event loop for long: a copy stuck on a full pipe closes it itself once its write returns."""
        if self._lock.acquire(timeout=0.5):
            try:
                self._close_locked()
            finally:
                self._lock.release()
        else:
            self._closed = True


async def serve_stdio(server: ArchivistServer) -> None:
    """The stdio MCP server until the client closes stdin or a stop signal arrives."""
    relay = StdinRelay()
    task = asyncio.ensure_future(server.run_stdio_async())
    with on_stop_signals(relay.close, task.cancel):
        with contextlib.suppress(asyncio.CancelledError):
            await task


def quiet_uvicorn_server(config: Any) -> Any:
    """A uvicorn server whose stop signals shut it down gracefully without re-raising them afterwards
    (uvicorn re-raises SIGINT after shutdown, which ends in a KeyboardInterrupt traceback)."""
    import uvicorn

    class QuietServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            def first() -> None:
                self.should_exit = True

            def second() -> None:
                self.force_exit = True

            with on_stop_signals(first, second):
                yield

    return QuietServer(config)


async def serve_http(app: ASGIApp, listening: socket.socket, **uvicorn_options: Any) -> None:
    """The Starlette app under uvicorn on a bound socket until a stop signal; `uvicorn_options` pass
    through (e.g. TLS files). uvicorn logs through our stderr logging (its per-request access log only
    at debug)."""
    import uvicorn

    level = logging.getLogger().getEffectiveLevel()
    config = uvicorn.Config(
        app,
        log_config=None,
        log_level=level,
        access_log=level <= logging.DEBUG,
        timeout_graceful_shutdown=HTTP_GRACE_SECONDS,
        **uvicorn_options,
    )
    await quiet_uvicorn_server(config).serve(sockets=[listening])
