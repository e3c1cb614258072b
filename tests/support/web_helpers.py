"""Browser-test plumbing: `archivist serve --http` (in a thread, or a process) and Debian's Chromium driven by
Playwright."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

CHROMIUM = os.environ.get("ARCHIVIST_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
ARCHIVIST = shutil.which("archivist", path=str(Path(sys.executable).parent)) or "archivist"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def console_env(database_url: str, files_dir: Path, **env_overrides: str) -> dict[str, str]:
    """The console server's whole environment: the test's without its ARCHIVIST_*, and the settings here."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHIVIST_")}
    env.update(
        {
            "DATABASE_URL": database_url,
            "ARCHIVIST_ALLOWED_PATHS": str(files_dir),
            "ARCHIVIST_DATA_DIR": str(files_dir.parent / "web-data"),
            "ARCHIVIST_CRAWL_ALLOW_PRIVATE": "true",
            "ARCHIVIST_CRAWL_DELAY_SECONDS": "0",
            "ARCHIVIST_LOG_LEVEL": "WARNING",
            "HF_HUB_OFFLINE": "1",
            **env_overrides,
        }
    )
    return env


@contextmanager
def console_server(database_url: str, files_dir: Path, **env_overrides: str) -> Iterator[str]:
    """`archivist serve --http` (with its crawl worker) on 127.0.0.1, in a thread of the test
    (tests/support/served.py); yields its base URL once /signin answers (the knowledge base has started)."""
    from tests.support.served import served

    with served(console_env(database_url, files_dir, **env_overrides), ready="/signin") as base:
        yield base


@contextmanager
def console_process(
    database_url: str, files_dir: Path, log_path: Path | None = None, **env_overrides: str
) -> Iterator[str]:
    """`archivist serve --http` (with its crawl worker) in its own process on 127.0.0.1, for a test that
    reads what the process writes; yields its base URL. Its stderr goes to `log_path` when given (else
    ARCHIVIST_TEST_SERVER_LOG, else a temporary file)."""
    port = free_port()
    env = console_env(database_url, files_dir, **env_overrides)
    # a file, not a pipe: a chatty server never blocks on it (ARCHIVIST_TEST_SERVER_LOG keeps it)
    keep = log_path or os.environ.get("ARCHIVIST_TEST_SERVER_LOG")
    log = open(keep, "w+") if keep else tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
    proc = subprocess.Popen([ARCHIVIST, "serve", "--http", "--port", str(port)], env=env, stderr=log, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        with httpx.Client(timeout=2) as http:  # one for all the tries: a client costs ~55 ms of CPU to build
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"server exited: {log.read()[-3000:]}")
                try:
                    # /signin is public: it answers once the knowledge base has started, whatever the access rules
                    if http.get(f"{base}/signin").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError("console did not start")
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@contextmanager
def chromium() -> Iterator[Any]:
    """One headless Debian Chromium (never a downloaded browser) with a fresh profile directory."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: `make test` installs Debian's chromium package")
    with tempfile.TemporaryDirectory(prefix="archivist-chromium-") as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


def screenshot(page: Any, name: str, into: Path | None = None) -> Path | None:
    """A full-page screenshot (the page is rendered whole either way), written into `into` (a test's own
    temporary directory) or, only when asked for (`make screenshots`, ARCHIVIST_SCREENSHOTS=1), into the
    tracked docs/screenshots: `make test` leaves the tree clean. The path written, if any."""
    folder = into or (SCREENSHOTS if os.environ.get("ARCHIVIST_SCREENSHOTS") else None)
    if folder is None:
        page.screenshot(full_page=True)
        return None
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
