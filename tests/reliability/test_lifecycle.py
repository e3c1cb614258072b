"""Clean lifecycle (issue 23, point 7): SIGTERM, SIGINT and stdin EOF end `serve` (stdio and HTTP),
`worker` and `crawl` with exit code 0 within 10 s, no traceback, the embedded PostgreSQL stopped (unless
another live Archivist process still uses it) and running crawl jobs handed back to the queue.

Each test runs real `archivist` processes, each against its own data directory (embedded PostgreSQL), a
copy of one initialized once (tests/conftest.py `started_data_dir`; the first start of an empty data
directory is tested in tests/cli)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import psutil
import pytest

from tests.conftest import copy_data_dir
from tests.support.cli_process import run_in_process
from tests.support.fixture_site import FixtureSite

ROOT = Path(__file__).resolve().parents[2]
EXIT_SECONDS = 10.0
START_SECONDS = 180.0


def cli_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "ARCHIVIST_DATABASE_URL")}
    env.update(
        ARCHIVIST_DATA_DIR=str(data_dir),
        ARCHIVIST_ALLOWED_PATHS=str(data_dir),
        ARCHIVIST_CRAWL_ALLOW_PRIVATE="true",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def spawn(data_dir: Path, *args: str, stderr: IO[Any], **extra: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-c", "import cli; cli.main()", *args]
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env=cli_env(data_dir, **extra),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
    )


@contextlib.contextmanager
def started(data_dir: Path, stderr_path: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """A running `archivist ARGS` process, killed on the way out whatever happened."""
    with stderr_path.open("w") as stderr:
        proc = spawn(data_dir, *args, stderr=stderr)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def run_cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A command around the one under test (queue a crawl, list the jobs): run by `cli.main` in this
    process (tests/support/cli_process.py), which starts and stops the data directory's PostgreSQL as
    its own process would, without ~2 s of CPU to start a Python."""
    return run_in_process(list(args), cli_env(data_dir))


def postgres_pids(data_dir: Path) -> list[int]:
    """Live postgres processes serving this data directory's pgdata."""
    pgdata = str((data_dir / "pgdata").resolve())
    found = []
    for proc in psutil.process_iter(["name", "cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if (proc.info["name"] or "").startswith("postgres") and any(pgdata in part for part in cmdline):
            found.append(proc.pid)
    return found


def wait_no_postgres(data_dir: Path, seconds: float = 5.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while (pids := postgres_pids(data_dir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return pids


def rpc(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> dict[str, Any] | None:
    """Send one JSON-RPC message over stdio; for a request, read lines until its response."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()
    if "id" not in message:
        return None
    while True:
        line = proc.stdout.readline()
        assert line, "the server closed stdout before answering"
        reply = json.loads(line)
        if reply.get("id") == message["id"]:
            return reply


def stdio_ready(proc: subprocess.Popen[bytes]) -> None:
    """Initialize, then make one tool call: it returns once the database and models are up."""
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "lifecycle-test", "version": "1"},
    }
    reply = rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    assert reply is not None and "result" in reply, reply
    rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    call = {"name": "manage_source", "arguments": {"action": "list"}}
    deadline = time.monotonic() + START_SECONDS
    for request_id in itertools.count(100):
        reply = rpc(proc, {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": call})
        assert reply is not None and "result" in reply, reply
        if not reply["result"].get("isError"):
            return
        assert time.monotonic() < deadline, reply  # still starting: ask again
        time.sleep(0.5)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_ready(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        assert proc.poll() is None, "serve --http exited during start-up"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                if json.loads(response.read()).get("ok"):
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError("serve --http did not become healthy")


def assert_clean_exit(proc: subprocess.Popen[bytes], stderr_path: Path, data_dir: Path) -> None:
    started = time.monotonic()
    try:
        code = proc.wait(timeout=EXIT_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"still running {EXIT_SECONDS} s after the signal:\n{stderr_path.read_text()[-3000:]}")
    stderr = stderr_path.read_text()
    assert code == 0, f"exit code {code} after {time.monotonic() - started:.1f} s:\n{stderr[-3000:]}"
    assert "Traceback" not in stderr, stderr[-3000:]
    assert not wait_no_postgres(data_dir), "the embedded PostgreSQL of this data directory is still running"


@pytest.fixture
def data_dir(tmp_path: Path, started_data_dir: Path) -> Iterator[Path]:
    """A copy of a data directory whose PostgreSQL was initialized and migrated once per session: these
    tests are about stopping, and initdb in each would cost more than all the rest of the process."""
    path = copy_data_dir(started_data_dir, tmp_path / "kb")
    yield path
    for pid in postgres_pids(path):  # never leave a server behind, whatever the test did
        psutil.Process(pid).kill()


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT", "EOF"])
def test_stdio_serve_stops_cleanly(data_dir: Path, tmp_path: Path, stop: str) -> None:
    stderr_path = tmp_path / "stderr.txt"
    with started(data_dir, stderr_path, "serve") as proc:
        stdio_ready(proc)
        assert postgres_pids(data_dir), "the embedded PostgreSQL should run while serving"
        if stop == "EOF":
            assert proc.stdin is not None
            proc.stdin.close()
        else:
            proc.send_signal(getattr(signal, stop))
        assert_clean_exit(proc, stderr_path, data_dir)


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT"])
def test_http_serve_stops_cleanly(data_dir: Path, tmp_path: Path, stop: str) -> None:
    port = free_port()
    stderr_path = tmp_path / "stderr.txt"
    with started(data_dir, stderr_path, "serve", "--http", "--port", str(port)) as proc:
        http_ready(port, proc)
        proc.send_signal(getattr(signal, stop))
        assert_clean_exit(proc, stderr_path, data_dir)


def test_postgres_stays_up_while_another_process_uses_it(data_dir: Path, tmp_path: Path) -> None:
    """Two servers share one data directory: the first to stop leaves PostgreSQL to the other."""
    with (tmp_path / "one.txt").open("w") as one_err, (tmp_path / "two.txt").open("w") as two_err:
        one = spawn(data_dir, "serve", stderr=one_err)
        stdio_ready(one)
        two = spawn(data_dir, "serve", stderr=two_err)
    try:
        stdio_ready(two)
        one.send_signal(signal.SIGTERM)
        assert one.wait(timeout=EXIT_SECONDS) == 0
        assert postgres_pids(data_dir), "PostgreSQL was stopped under a live server"
        rpc(two, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        two.send_signal(signal.SIGTERM)
        assert_clean_exit(two, tmp_path / "two.txt", data_dir)
    finally:
        for proc in (one, two):
            if proc.poll() is None:
                proc.kill()


def slow_site() -> FixtureSite:
    """A site of 30 pages that take a second each: a crawl of it runs for half a minute."""
    site = FixtureSite(with_defaults=False).start()
    prose = "<p>This page describes how the slow fixture site is laid out and why it answers so slowly.</p>" * 5
    links = "".join(f'<li><a href="/p/{i}">Slow page {i}</a></li>' for i in range(30))
    site.set_page(
        "/", f"<html><head><title>Home</title></head><body><h1>Home</h1>{prose}<ul>{links}</ul></body></html>"
    )
    for i in range(30):
        body = f"<html><head><title>Page {i}</title></head><body><h1>Page {i}</h1>{prose}</body></html>"
        site.set_page(f"/p/{i}", body, delay=1.0)
    return site


def wait_for_pages(site: FixtureSite, count: int, proc: subprocess.Popen[bytes]) -> None:
    """Wait until the crawl has asked for `count` of the slow pages (so a job is running)."""
    deadline = time.monotonic() + START_SECONDS
    while sum(1 for record in list(site.request_log) if record.path.startswith("/p/")) < count:
        assert proc.poll() is None, "the process exited before crawling"
        assert time.monotonic() < deadline, "the crawl never started"
        time.sleep(0.2)


def job_statuses(data_dir: Path) -> list[str]:
    listed = run_cli(data_dir, "jobs", "--json")
    assert listed.returncode == 0, listed.stderr[-2000:]
    return [job["status"] for job in json.loads(listed.stdout)]


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT"])
def test_crawl_command_hands_its_job_back(data_dir: Path, tmp_path: Path, stop: str) -> None:
    site = slow_site()
    stderr_path = tmp_path / "stderr.txt"
    try:
        with started(data_dir, stderr_path, "crawl", site.url_for("/"), "--max-pages", "30") as proc:
            wait_for_pages(site, 2, proc)
            proc.send_signal(getattr(signal, stop))
            assert_clean_exit(proc, stderr_path, data_dir)
    finally:
        site.stop()
    assert job_statuses(data_dir) == ["queued"]


def test_stdio_serve_hands_a_running_crawl_back(data_dir: Path, tmp_path: Path) -> None:
    site = slow_site()
    stderr_path = tmp_path / "stderr.txt"
    try:
        with started(data_dir, stderr_path, "serve") as proc:
            stdio_ready(proc)
            arguments = {"action": "start", "url": site.url_for("/"), "max_pages": 30, "recursive": True}
            call = {"name": "crawl_website", "arguments": arguments}
            reply = rpc(proc, {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": call})
            assert reply is not None and not reply["result"].get("isError"), reply
            wait_for_pages(site, 2, proc)
            proc.send_signal(signal.SIGTERM)
            assert_clean_exit(proc, stderr_path, data_dir)
    finally:
        site.stop()
    assert job_statuses(data_dir) == ["queued"]


def test_worker_stops_cleanly(data_dir: Path, tmp_path: Path) -> None:
    site = slow_site()
    stderr_path = tmp_path / "stderr.txt"
    try:
        queued = run_cli(data_dir, "crawl", site.url_for("/"), "--max-pages", "30", "--detach")
        assert queued.returncode == 0, queued.stderr[-2000:]
        with started(data_dir, stderr_path, "worker") as proc:
            wait_for_pages(site, 2, proc)
            proc.send_signal(signal.SIGTERM)
            assert_clean_exit(proc, stderr_path, data_dir)
    finally:
        site.stop()
    assert job_statuses(data_dir) == ["queued"]


def test_ingest_stops_cleanly(data_dir: Path, tmp_path: Path) -> None:
    """Ctrl-C in the middle of a long ingest: exit 0, no traceback, no PostgreSQL left behind."""
    folder = data_dir / "many"
    folder.mkdir()
    for i in range(400):
        (folder / f"note-{i}.md").write_text(f"# Note {i}\n\n" + f"Paragraph {i} about brewing tea. " * 40 + "\n")
    stderr_path = tmp_path / "stderr.txt"
    with started(data_dir, stderr_path, "ingest", str(folder), "--source", "Many") as proc:
        deadline = time.monotonic() + START_SECONDS
        while not (data_dir / "pgdata" / "postmaster.pid").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "ingest never started PostgreSQL"
            time.sleep(0.2)
        time.sleep(2.0)  # into the ingest itself
        assert proc.poll() is None, "the ingest finished before it could be stopped"
        proc.send_signal(signal.SIGINT)
        assert_clean_exit(proc, stderr_path, data_dir)
