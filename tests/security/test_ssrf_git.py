"""Git fetches go through the one connector (issue 27, points 4 and the pack bound).

Real smart-HTTP git servers on loopback (tests/support/git_server.py): 127.0.0.1 plays the public host and a
trap on 127.0.0.2, same port, the private one. A name that answers public to the check and private to
the connection (DNS rebinding) must not bring a fetch to the trap with ARCHIVIST_GIT_ALLOW_PRIVATE off;
a pack larger than ARCHIVIST_GIT_MAX_PACK_MB stops the sync while it is received, storing nothing.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import urllib3
from dulwich.server import update_server_info

from models.jobs import CrawlJob
from services.app import Archivist, run_worker
from services.net import safety
from services.sync.git import remote
from services.sync.git.remote import BoundedGitClient
from tests.conftest import make_settings
from tests.security.ssrf_support import PRIVATE, PUBLIC, RebindingDNS, Trap, pretend_public
from tests.support.git_server import GitServer, Repository

pytest_plugins = ("tests.support.git_fixtures",)  # the git_server and git_app fixtures


async def open_app(database_url: str, files_dir: Path, embedder: Any, **overrides: Any) -> Archivist:
    settings = make_settings(
        database_url, files_dir, job_poll_seconds=0.1, job_heartbeat_seconds=0.5, job_stale_seconds=2.0, **overrides
    )
    return await Archivist.open(settings, embedder)


@pytest.fixture
async def strict_app(database_url: str, files_dir: Path, embedder: Any) -> AsyncIterator[Archivist]:
    """Private addresses refused for git; 127.0.0.1 counts as public (pretend_public, in the test)."""
    app = await open_app(database_url, files_dir, embedder, git_allow_private=False)
    yield app
    await app.close()


async def sync(app: Archivist, source_id: Any) -> CrawlJob:
    """Queue a sync and run a worker until it finishes, whatever the outcome."""
    started = await app.git.queue(source_id)
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(app, stop, "ssrf-git"))
    try:
        return await app.jobs.wait(started.job.id, 60, interval=0.1)
    finally:
        stop.set()
        await task


@pytest.mark.usefixtures("owner")
async def test_git_fetch_connects_to_the_checked_address(
    strict_app: Archivist, git_server: GitServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name answers public to the bind check and to the fetch's check, private to the connection
    after: every connection goes to the address its own look-up checked, so the trap hears nothing."""
    pretend_public(monkeypatch)
    # the code before the connector imported address_class by name: let it see 127.0.0.1 as public too
    monkeypatch.setattr(remote, "address_class", safety.address_class, raising=False)
    repo = git_server.add("rebound")
    repo.commit({"guide.md": "# Guide\n\nThe public repository.\n"})
    port = git_server.server.server_port
    dns = RebindingDNS(monkeypatch, {"rebind.test": [PUBLIC, PUBLIC, PRIVATE]})
    with Trap(PRIVATE, port) as trap:
        config, _ = await strict_app.git.bind(f"http://rebind.test:{port}/rebound.git")
        git_server.requests.clear()
        job = await sync(strict_app, config.source_id)
        assert trap.hits == [], "the git fetch reached the private address the name rebound to"
    assert dns.lookups["rebind.test"] >= 2
    assert ("/rebound.git/info/refs", "") in git_server.requests  # the checked (public) address answered
    assert job.status == "failed" and "refusing to fetch" in (job.error or "") and "loopback" in job.error, job


@pytest.mark.usefixtures("owner")
async def test_a_redirect_hop_to_a_private_name_is_refused(
    strict_app: Archivist, git_server: GitServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    pretend_public(monkeypatch)
    port = git_server.server.server_port
    RebindingDNS(monkeypatch, {"public.test": [PUBLIC], "internal.test": [PRIVATE]})
    git_server.redirects["hop.git"] = f"http://internal.test:{port}/rebound-target.git"
    with Trap(PRIVATE, port) as trap:
        config, _ = await strict_app.git.bind(f"http://public.test:{port}/hop.git")
        job = await sync(strict_app, config.source_id)
        assert trap.hits == []
    assert job.status == "failed" and "internal.test" in (job.error or ""), job


@pytest.mark.usefixtures("owner")
async def test_a_pack_over_the_budget_stops_the_sync_and_stores_nothing(
    database_url: str, files_dir: Path, embedder: Any, git_server: GitServer
) -> None:
    repo = git_server.add("heavy")
    repo.commit({"guide.md": "# Guide\n\nSmall.\n", "blob.md": os.urandom(1_500_000).hex()})  # ~1.5 MB packed
    app = await open_app(database_url, files_dir, embedder, git_allow_private=True, git_max_pack_mb=1)
    try:
        config, _ = await app.git.bind(git_server.url("heavy"))
        job = await sync(app, config.source_id)
        assert job.status == "failed" and "ARCHIVIST_GIT_MAX_PACK_MB" in (job.error or ""), job
        assert job.documents_created == 0
        clone = config.directory(app.settings.data_dir)
        assert not list((clone / "objects" / "pack").glob("*.pack")), "a pack over the budget was stored"
        assert repo.repo.head().decode() not in {p.name for p in (clone / "objects").rglob("*")}
    finally:
        await app.close()
    small = git_server.add("light")
    small.commit({"guide.md": "# Guide\n\nSmall enough.\n"})
    app = await open_app(database_url, files_dir, embedder, git_allow_private=True, git_max_pack_mb=1)
    try:
        config, _ = await app.git.bind(git_server.url("light"))
        assert (await sync(app, config.source_id)).status == "completed"
    finally:
        await app.close()


def test_the_git_client_connects_only_through_the_connector() -> None:
    with pytest.raises(TypeError, match="connector"):
        BoundedGitClient(
            "http://example.com/r.git", pool_manager=urllib3.PoolManager(), max_pack_bytes=1, credentials=None
        )  # type: ignore[arg-type]


@pytest.fixture
def dumb_server(tmp_path: Path) -> Iterator[tuple[str, Repository]]:
    """A bare repository served by a plain static web server (git's "dumb HTTP"): no smart protocol,
    so nothing can count its objects as they arrive."""
    repo = Repository(tmp_path / "static.git")
    handler = functools.partial(QuietStatic, directory=str(tmp_path))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/static.git", repo
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)
    repo.repo.close()


class QuietStatic(SimpleHTTPRequestHandler):
    """Static files; records every path asked for."""

    asked: list[str] = []

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        self.asked.append(self.path)


@pytest.mark.usefixtures("owner")
async def test_a_dumb_http_server_is_refused_before_any_object(
    database_url: str, files_dir: Path, embedder: Any, dumb_server: tuple[str, Repository]
) -> None:
    """dulwich falls back to "dumb HTTP" for a plain web server and downloads whole packs into memory,
    past any budget: such a server is refused once it has answered info/refs."""
    url, repo = dumb_server
    repo.commit({"guide.md": "# Guide\n\nServed as static files.\n", "blob.md": os.urandom(1_500_000).hex()})
    update_server_info(repo.repo)
    app = await open_app(database_url, files_dir, embedder, git_allow_private=True, git_max_pack_mb=1)
    try:
        config, _ = await app.git.bind(url, ref="master")
        job = await sync(app, config.source_id)
        assert job.status == "failed" and "dumb HTTP" in (job.error or ""), job
        assert QuietStatic.asked and not [path for path in QuietStatic.asked if "/objects/" in path]
        clone = config.directory(app.settings.data_dir)
        assert not [p for p in (clone / "objects").rglob("*") if p.is_file()], "objects were stored"
    finally:
        await app.close()
