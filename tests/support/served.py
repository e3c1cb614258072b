"""`archivist serve --http ARGS` run by its own function (`commands.serve.serve`) in a thread of the test
process: the real app (console, hardening, auth gate, crawl worker unless --no-worker) served by
uvicorn on a real loopback port, reached by real HTTP and MCP clients.

A real `archivist serve --http` process costs ~4 s of CPU (the interpreter, ~900 imports, the ONNX
model, its pools) before it answers; a test that is not about the process (its signals, its stdio, its
environment, two processes side by side, a crash) pays that for nothing. In a thread the server meets
what it would in its own process: the settings read from exactly the environment given (nothing of the
test's ARCHIVIST_* leaks in), its own event loop, pools and model gate, and its own port. What differs,
on purpose: the interpreter and the imports are the test's, the embedding model is the one instance
per configuration the in-process commands share (tests/support/cli_process.py), uvicorn installs no
signal handlers (only the main thread may; a stop sets uvicorn's `should_exit`, as its handler does),
and a variable read at run time (services/access/secret_gate.py: a crawl's `env:NAME`, a worker's held
variables) is read from the test's environment: a test of those keeps a real process.

`set_remote_errors` is the process's switch: on while a server runs here, put back when it stops.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx

from tests.support.cli_process import exactly_this_environment, shared_models
from tests.support.web_helpers import free_port

START_SECONDS = 90
_local = threading.local()
_patch_lock = threading.Lock()


def _install_thread_aware_uvicorn() -> None:
    """`commands.lifecycle.quiet_uvicorn_server` installs signal handlers, which only the main thread may:
    in a thread of ours it builds a plain uvicorn server (which skips them off the main thread) and hands
    it to the thread's `ServedHttp`; anywhere else it is the original."""
    import commands.lifecycle as lifecycle

    with _patch_lock:
        if getattr(lifecycle.quiet_uvicorn_server, "thread_aware", False):
            return
        original = lifecycle.quiet_uvicorn_server

        def quiet_uvicorn_server(config: Any) -> Any:
            served: ServedHttp | None = getattr(_local, "served", None)
            if served is None:
                return original(config)
            import uvicorn

            served.uvicorn = uvicorn.Server(config)
            return served.uvicorn

        quiet_uvicorn_server.thread_aware = True  # type: ignore[attr-defined]
        lifecycle.quiet_uvicorn_server = quiet_uvicorn_server


class ServedHttp:
    """One `archivist serve --http` in a thread: `start()`, `stop()` (both blocking), `base` its URL."""

    def __init__(self, env: dict[str, str], *args: str, scheme: str = "http") -> None:
        self.env = env
        self.port = free_port()
        self.argv = ["serve", "--http", "--port", str(self.port), *args]
        self.base = f"{scheme}://127.0.0.1:{self.port}"
        self.uvicorn: Any = None
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._remote_errors = False
        self._args, self._settings = self._read_command_line()

    def _read_command_line(self) -> tuple[Any, Any]:
        """What `cli.main` reads from its arguments and its environment, read in the calling thread (the
        environment is the process's: no other thread should read it meanwhile)."""
        import cli
        from server import env_profiles
        from services.core.settings import get_settings

        with exactly_this_environment(self.env):
            get_settings.cache_clear()
            try:
                args = cli.build_parser().parse_args(self.argv)
                args.profile = args.profile or env_profiles() or None
                return args, get_settings()
            finally:
                get_settings.cache_clear()

    def start(self, ready_path: str | None = None, verify: Any = False) -> None:
        """Serve until `stop()`; return once uvicorn listens (and `ready_path`, if given, answers 200)."""
        import services.access.disclosure as disclosure
        from commands.serve import serve

        _install_thread_aware_uvicorn()
        self._remote_errors = disclosure._remote_errors
        args, settings = self._args, self._settings

        def run() -> None:
            _local.served = self
            try:
                with shared_models():
                    serve(args, settings)
            except BaseException as exc:  # e.g. SystemExit from commands.output.fail: the "process" exited
                self.error = exc

        self._thread = threading.Thread(target=run, name=f"archivist-serve-{self.port}", daemon=True)
        self._thread.start()
        try:
            self._wait(ready_path, verify)
        except BaseException:
            self.stop()
            raise

    def _wait(self, ready_path: str | None, verify: Any) -> None:
        assert self._thread is not None
        deadline = time.monotonic() + START_SECONDS
        while not (self.uvicorn is not None and self.uvicorn.started):
            if not self._thread.is_alive():
                raise RuntimeError(f"server exited: {self.error!r}")
            if time.monotonic() > deadline:
                raise TimeoutError("server did not start")
            time.sleep(0.02)
        if ready_path is None:
            return
        with httpx.Client(timeout=2, verify=verify) as http:
            while True:
                try:
                    if http.get(f"{self.base}{ready_path}").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{ready_path} did not answer 200")
                time.sleep(0.05)

    def stop(self) -> None:
        """As SIGTERM does: uvicorn's graceful shutdown, the lifespan's (worker, audit log, pools)."""
        import services.access.disclosure as disclosure

        if self._thread is None:
            return
        if self.uvicorn is not None:
            self.uvicorn.should_exit = True
        self._thread.join(30)
        alive = self._thread.is_alive()
        self._thread = None
        disclosure.set_remote_errors(self._remote_errors)
        if alive:
            raise RuntimeError(f"the server on port {self.port} did not stop within 30 s")


@contextmanager
def served(
    env: dict[str, str], *args: str, scheme: str = "http", ready: str | None = None, verify: Any = False
) -> Iterator[str]:
    """`archivist serve --http --port P ARGS` in a thread (see the module's docstring); yields its base URL."""
    server = ServedHttp(env, *args, scheme=scheme)
    server.start(ready, verify)
    try:
        yield server.base
    finally:
        server.stop()


@asynccontextmanager
async def served_async(
    env: dict[str, str], *args: str, scheme: str = "http", ready: str | None = None, verify: Any = False
) -> AsyncIterator[str]:
    """`served` for async tests: starting and stopping wait in a thread, so the test's loop (and whatever
    the server calls that it serves, such as an identity provider) keeps running meanwhile."""
    server = ServedHttp(env, *args, scheme=scheme)
    await asyncio.to_thread(server.start, ready, verify)
    try:
        yield server.base
    finally:
        await asyncio.to_thread(server.stop)
