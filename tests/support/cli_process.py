"""`archivist ARGS` run by its entry function (`cli.main`) inside the test process, answered like
`subprocess.run(..., capture_output=True, text=True)`.

A real `archivist` process costs 1.5-2.5 s of CPU before it does anything (the interpreter and ~900
imports); a test that runs a command 25 times spent a minute starting Pythons. In-process, the command
meets what it would meet in its own process: exactly the environment given (nothing of the test's
ARCHIVIST_* leaks in), the repository as its working directory, /dev/null as stdin, fresh logging (no
handler until `cli.main` configures its own on the captured stderr), and stdout/stderr captured at
the file descriptors, so output written by libraries or child processes is read too, and the settings
read anew (`get_settings` caches them for the life of a process). The exit code is
SystemExit's, 1 with the traceback for an exception that escaped `main` (as Python prints it).

A process loads its embedding model when it opens the knowledge base (~1 s of CPU for the packaged
ONNX model), even for `jobs ID`; in-process commands share one instance per model (`shared_models`),
as loaded by the same `create_embedder` from the command's own settings, so each command still gets
the model its environment names. Loading stays covered by the real processes below and tests/embeddings.

The entry point itself stays covered by real processes: each command family keeps at least one test
through `tests.cli.test_cli.archivist` (stdio `serve`, `--data-dir` with its own embedded PostgreSQL,
`completion | head`, and the commands whose point is the process: signals, exit on a taken port).
Call it from a plain (sync) test: the command runs its own event loop with `asyncio.run`, and signal
handlers need the main thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def exactly_this_environment(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def working_directory(path: Path) -> Iterator[None]:
    saved = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(saved)


@contextlib.contextmanager
def fresh_logging() -> Iterator[None]:
    """The root logger without handlers (so `logging.basicConfig` in `cli.main` installs one on the
    captured stderr, as in a new process), and every logger level and the warnings capture put back."""
    root = logging.getLogger()
    manager = logging.Logger.manager
    saved_handlers, saved_level = root.handlers[:], root.level
    saved_levels = {name: log.level for name, log in manager.loggerDict.items() if isinstance(log, logging.Logger)}
    root.handlers = []
    try:
        yield
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers, root.level = saved_handlers, saved_level
        for name, log in list(manager.loggerDict.items()):
            if isinstance(log, logging.Logger):
                log.setLevel(saved_levels.get(name, logging.NOTSET))
        logging.captureWarnings(False)


@contextlib.contextmanager
def captured_streams() -> Iterator[tuple[io.TextIOBase, io.TextIOBase]]:
    """fds 0/1/2 and sys.stdin/stdout/stderr on /dev/null and two temporary files (not ttys, like pipes);
    yields the two files, read after the block."""
    with (
        open(os.devnull) as null,
        tempfile.TemporaryFile("w+", encoding="utf-8") as out,
        tempfile.TemporaryFile("w+", encoding="utf-8") as err,
    ):
        saved_fds = [os.dup(fd) for fd in (0, 1, 2)]
        saved_streams = sys.stdin, sys.stdout, sys.stderr
        for stream in saved_streams[1:]:
            with contextlib.suppress(Exception):
                stream.flush()
        try:
            for fd, target in zip((0, 1, 2), (null, out, err), strict=True):
                os.dup2(target.fileno(), fd)
            sys.stdin = open(0, closefd=False)  # noqa: SIM115 (closed below)
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            yield out, err
        finally:
            for stream in (sys.stdin, sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
                    stream.close()
            sys.stdin, sys.stdout, sys.stderr = saved_streams
            for fd, saved in zip((0, 1, 2), saved_fds, strict=True):
                os.dup2(saved, fd)
                os.close(saved)


def exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)  # sys.exit("message"): Python prints it and exits 1
    return 1


_models: dict[tuple[Any, ...], Any] = {}
_sharing = 0  # blocks inside `shared_models` (commands here, servers in threads: tests/support/served.py)
_sharing_lock = threading.Lock()


def shared_embedder(settings: Any) -> Any:
    """`create_embedder(settings)`, once per model configuration (stateless between calls: an ONNX
    session or a sentence-transformers model)."""
    from services.embeddings import create_embedder

    key = (
        settings.embedding_provider,
        settings.embedding_model.strip(),
        settings.embedding_batch_size,
        settings.embedding_query_prefix,
    )
    with _sharing_lock:
        if key not in _models:
            _models[key] = create_embedder(settings)
        return _models[key]


@contextlib.contextmanager
def shared_models() -> Iterator[None]:
    """`Archivist.open` gets the embedder from `shared_embedder` while any block is inside (blocks may
    overlap in any order: servers in threads start and stop independently of each other)."""
    global _sharing
    import services.app
    from services.embeddings import create_embedder

    with _sharing_lock:
        _sharing += 1
        services.app.create_embedder = shared_embedder
    try:
        yield
    finally:
        with _sharing_lock:
            _sharing -= 1
            if _sharing == 0:
                services.app.create_embedder = create_embedder


def run_in_process(args: list[str], env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """`archivist ARGS` with `env` as its whole environment, through `cli.main(args)`."""
    with contextlib.suppress(RuntimeError):
        asyncio.get_running_loop()
        raise AssertionError("run_in_process needs a sync test: the command runs its own event loop")
    import cli
    from services.core.settings import get_settings

    code = 0
    with (
        exactly_this_environment(env),
        working_directory(cwd),
        fresh_logging(),
        shared_models(),
        captured_streams() as (out, err),
    ):
        get_settings.cache_clear()  # read once per process: this "process" reads its own environment
        try:
            cli.main(args)
        except SystemExit as exc:
            code = exit_code(exc)
        except Exception:  # escaped main: Python prints the traceback and exits 1
            traceback.print_exc()
            code = 1
        finally:
            get_settings.cache_clear()
            sys.stdout.flush()
            sys.stderr.flush()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    return subprocess.CompletedProcess(["archivist", *args], code, stdout, stderr)
