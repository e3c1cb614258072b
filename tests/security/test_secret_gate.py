"""Issue 27, point 3: every outbound secret passes one gate (services/access/secret_gate.py).

Attacks, each against a real server on 127.0.0.1 that records what it is sent:
- a git source's `auth_env` naming the server's own variables (the request-state key, the database
  URL, a PG* password) must never send them as a Basic-auth password: refused when bound, when a sync
  is queued for a binding stored earlier, and again inside the job, whatever was queued;
- a bearer token made by `archivist token create` without `--profile` reaches every source but is not
  the local owner: it may not send a server variable the operator did not list in ARCHIVIST_SECRET_ENV
  (a cloud key) in crawl headers or as a git token, while a listed one still goes.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from models.jobs import CrawlJob, CrawlParams
from services.app import Archivist, run_worker
from services.core.errors import InvalidArgument
from tests.security.helpers import http_process, server_env
from tests.support.fixture_site import FixtureSite, html_page
from tests.support.git_server import GitServer
from tests.support.web_helpers import ARCHIVIST

pytest_plugins = ("tests.support.git_fixtures",)  # the git_server and git_app fixtures

#: the server's own variables, each with a value that would leak something that matters
SERVER_VARIABLES = ("ARCHIVIST_REQUEST_STATE_KEY", "DATABASE_URL", "PGPASSWORD")


def decoded(header: str) -> str:
    """An Authorization header with a Basic credential decoded (what the remote host learns)."""
    if header.startswith("Basic "):
        return base64.b64decode(header[6:]).decode(errors="replace")
    return header


def leaked(git_server: GitServer, secret: str) -> list[str]:
    return [path for path, header in git_server.requests if secret in decoded(header)]


async def run_job(app: Archivist, job_id: Any) -> CrawlJob:
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(app, stop, "gate-test"))
    try:
        return await app.jobs.wait(job_id, 60, interval=0.1)
    finally:
        stop.set()
        await task


async def test_git_auth_env_never_sends_the_servers_own_variables(
    git_app: Archivist, git_server: GitServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even the local owner: bind (and, on the old code, sync) with auth_env naming a server variable."""
    repo = git_server.add("gate-leak", private=True)
    repo.commit({"notes.md": "# Notes\n\nNothing to see.\n"})
    url = git_server.url("gate-leak")
    for name in SERVER_VARIABLES:
        secret = f"{name.lower()}-{uuid.uuid4().hex}"
        monkeypatch.setenv(name, f"postgresql://archivist:{secret}@db.internal/kb" if "URL" in name else secret)
        git_server.requests.clear()
        refusal = ""
        try:
            config, _ = await git_app.git.bind(url, auth_env=name)
            await run_job(git_app, (await git_app.git.queue(config.source_id)).job.id)
        except InvalidArgument as exc:
            refusal = exc.message
        assert not leaked(git_server, secret), f"{name} was sent to the git host"
        assert "server's own variables" in refusal and name in refusal, refusal


@pytest.mark.usefixtures("owner")
async def test_a_stored_binding_naming_a_server_variable_is_refused_at_queue_and_in_the_job(
    git_app: Archivist, git_server: GitServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A binding stored before the gate existed: queueing refuses it, and a job queued anyway reads
    the variable through the same gate, so it fails without sending anything."""
    repo = git_server.add("gate-stored", private=True)
    repo.commit({"notes.md": "# Notes\n\nNothing here either.\n"})
    secret = f"state-key-{uuid.uuid4().hex}"
    monkeypatch.setenv("ARCHIVIST_REQUEST_STATE_KEY", secret)
    config, _ = await git_app.git.bind(git_server.url("gate-stored"))
    await git_app.db.pool.execute(
        "UPDATE source_git SET auth_env = 'ARCHIVIST_REQUEST_STATE_KEY' WHERE source_id = $1", config.source_id
    )
    git_server.requests.clear()
    with pytest.raises(InvalidArgument, match="server's own variables"):
        await git_app.git.queue(config.source_id)
    params = CrawlParams(url=config.url).model_dump()
    queued = await git_app.jobs.insert(config.source_id, "git", params)
    job = await run_job(git_app, queued.id)
    assert job.status == "failed" and "server's own variables" in (job.error or ""), job
    assert not leaked(git_server, secret)


# --- a token without profiles, against a real `archivist serve --http` ----------------------------------


@pytest.fixture(scope="module")
def recorder() -> Iterator[FixtureSite]:
    """The site a caller names: records every request's headers."""
    with FixtureSite(with_defaults=False) as site:
        site.set_page("/", html_page("Welcome", ["A page that records who visits it."]))
        site.set_page("/robots.txt", "User-agent: *\nAllow: /\n", "text/plain")
        yield site


@pytest.fixture(scope="module")
def cloud_key() -> str:
    return f"aws-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
async def served(
    database_url: str, files_dir: Path, cloud_key: str, git_server: GitServer
) -> AsyncIterator[tuple[str, str]]:
    """A served knowledge base with a worker, a cloud key in its environment, DOCS_* listed; and a
    token made by `archivist token create` without --profile. Yields (mcp url, token secret)."""
    env = server_env(
        database_url,
        files_dir,
        ARCHIVIST_CRAWL_ALLOW_PRIVATE="true",
        ARCHIVIST_GIT_ALLOW_PRIVATE="true",
        ARCHIVIST_RUN_WORKER="true",
        ARCHIVIST_JOB_POLL_SECONDS="0.2",
        ARCHIVIST_SECRET_ENV="DOCS_*",
        AWS_SECRET_ACCESS_KEY=cloud_key,
        DOCS_TOKEN="docs-listed-value",
    )
    made = subprocess.run(
        [ARCHIVIST, "token", "create", "--name", "roamer"], env=env, capture_output=True, text=True, timeout=120
    )
    assert made.returncode == 0, made.stderr
    secret = next(word for word in made.stdout.split() if word.startswith("arch_"))
    with http_process(env) as base:  # its own process: the gate reads the server's own environment
        yield f"{base}/mcp", secret


async def call(served: tuple[str, str], **arguments: Any) -> dict[str, Any]:
    """crawl_website over HTTP with the token's bearer secret."""
    mcp_url, secret = served
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=60)
    async with Client(streamable_http_client(mcp_url, http_client=http)) as client:
        result = await client.call_tool("crawl_website", arguments)
    return json.loads(result.content[0].text)


def headers_seen(site: FixtureSite) -> str:
    return json.dumps([dict(record.headers) for record in site.request_log])


async def test_a_token_without_profiles_cannot_send_an_unlisted_variable(
    served: tuple[str, str], recorder: FixtureSite, git_server: GitServer, cloud_key: str
) -> None:
    stolen = await call(
        served, action="start", url=recorder.url_for("/"), headers={"X-Api-Key": "env:AWS_SECRET_ACCESS_KEY"}
    )
    if stolen["success"]:  # the old code: let the server's worker crawl, to show where the key went
        await call(served, action="status", job_id=stolen["crawl_job"]["id"], wait_seconds=20)
    assert cloud_key not in headers_seen(recorder), "the cloud key was sent to the caller's host"
    assert stolen.get("error_code") == "PERMISSION_DENIED" and "ARCHIVIST_SECRET_ENV" in stolen["error"], stolen
    assert cloud_key not in json.dumps(stolen)

    repo = git_server.add("gate-token", private=True)
    repo.commit({"notes.md": "# Notes\n\nA token's repository.\n"})
    git_server.requests.clear()
    synced = await call(served, action="sync", git_url=git_server.url("gate-token"), auth_env="AWS_SECRET_ACCESS_KEY")
    if synced["success"]:
        await call(served, action="status", job_id=synced["crawl_job"]["id"], wait_seconds=20)
    assert not leaked(git_server, cloud_key), "the cloud key was sent to the caller's git host"
    assert synced.get("error_code") == "PERMISSION_DENIED", synced


async def test_a_token_may_send_what_the_operator_listed(served: tuple[str, str], recorder: FixtureSite) -> None:
    started = await call(
        served, action="start", url=recorder.url_for("/"), headers={"X-Api-Key": "env:DOCS_TOKEN"}, wait_seconds=20
    )
    assert started["success"], started
    for _ in range(100):
        if "docs-listed-value" in headers_seen(recorder):
            break
        await asyncio.sleep(0.2)
    assert "docs-listed-value" in headers_seen(recorder)
