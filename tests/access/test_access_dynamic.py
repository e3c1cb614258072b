"""Bearer auth switches on without a restart and never off (tokens made and revoked by another knowledge
base instance than the server's, through the database), a token's new sources join its first profile,
and the per-token running-jobs limit."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters

from services.app import Archivist
from services.core.settings import Settings
from tests.access.test_access_http import HEADERS, INIT, authed
from tests.e2e.test_e2e import ARCHIVIST, server_env
from tests.support.cli_process import run_in_process
from tests.support.mcp_helpers import err, ok
from tests.support.served import ServedHttp


def cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([ARCHIVIST, *args], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def secret_of(output: str) -> str:
    return next(line.strip() for line in output.splitlines() if line.strip().startswith("arch_"))


async def post_init(url: str, secret: str | None = None) -> httpx.Response:
    headers = dict(HEADERS)
    if secret:
        headers["Authorization"] = f"Bearer {secret}"
    async with httpx.AsyncClient() as http:
        return await http.post(url, json=INIT, headers=headers)


def cli_here(env: dict[str, str], *args: str) -> str:
    """`archivist ARGS` in this process (tests/support/cli_process.py), with its own knowledge base
    instance, not the server's; `cli` runs a real one."""
    done = run_in_process(list(args), env)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.usefixtures("owner")
def test_auth_turns_on_and_off_without_restart(
    settings: Settings, embedder: Any, database_url: str, files_dir: Path
) -> None:
    """A sync test with its own loop (asyncio.Runner), idle between its steps: the commands run in this
    process (`cli_here`, which needs no running loop) instead of four archivist processes."""
    with asyncio.Runner() as loop:
        app = loop.run(Archivist.open(settings, embedder))
        try:
            auth_turns_on_and_off(loop, app, database_url, files_dir)
        finally:
            loop.run(app.close())


def auth_turns_on_and_off(loop: asyncio.Runner, app: Archivist, database_url: str, files_dir: Path) -> None:
    async def set_up() -> tuple[Any, Any]:
        s1 = await app.sources.create(title="Dyn one", source_type="api")
        s2 = await app.sources.create(title="Dyn two", source_type="api")
        await app.profiles.create("pj1", "one", [s1.id])
        await app.profiles.create("pj2", "two", [s2.id])
        return s1, s2

    s1, _ = loop.run(set_up())
    env = {**server_env(database_url, files_dir), "ARCHIVIST_MAX_RUNNING_JOBS_PER_TOKEN": "2"}
    server = ServedHttp(env, "--no-worker")  # in a thread (tests/support/served.py)
    url = f"{server.base}/mcp"

    async def open_while_no_token() -> None:
        async with Client(url) as anonymous:  # loopback, no token yet: open
            await ok(anonymous, "manage_source", action="list")
        assert (await post_init(url)).status_code == 200

    async def the_token_is_needed(secret: str) -> str:
        refused = await post_init(url)
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer ")
        assert (await post_init(url, "arch_wrong")).status_code == 401
        assert (await post_init(url, secret)).status_code == 200
        async with authed(url, secret) as c:
            search = next(t for t in (await c.list_tools()).tools if t.name == "search_knowledge_base")
            assert "pj2 (two); pj1 (one)" in (search.description or "")  # the token's profiles, in its order
            made = (await ok(c, "manage_source", action="create", title="Dyn made"))["source"]["id"]
            await ok(c, "manage_source", action="get", source_id=made)
            # two running/queued jobs at most (the setting); the third is refused, retryable
            first = await ok(c, "crawl_website", action="start", url="http://127.0.0.1:9/j1/", source_id=made)
            await ok(c, "crawl_website", action="start", url="http://127.0.0.1:9/j2/", source_id=str(s1.id))
            over = await err(c, "crawl_website", "RATE_LIMITED", action="start", url="http://127.0.0.1:9/j3/")
            assert over["retryable"] is True and over["retry_after_seconds"] > 0 and "cancel" in over["suggestion"]
            # tool calls still work, and a finished job frees a place
            await ok(c, "crawl_website", action="cancel", job_id=first["crawl_job"]["id"])
            await ok(c, "crawl_website", action="start", url="http://127.0.0.1:9/j3/", source_id=made)
        assert str(made) in {str(s) for s in (await app.profiles.get("pj2")).source_ids}
        assert str(made) not in {str(s) for s in (await app.profiles.get("pj1")).source_ids}
        return str(made)

    async def its_own_limit(one: str) -> None:
        async with authed(url, one) as c1:
            await ok(c1, "crawl_website", action="start", url="http://127.0.0.1:9/k1/", source_id=str(s1.id))
            k2 = "http://127.0.0.1:9/k2/"
            await err(c1, "crawl_website", "RATE_LIMITED", action="start", url=k2, source_id=str(s1.id))

    async def refused(secret: str | None) -> int:
        return (await post_init(url, secret)).status_code

    server.start()
    try:
        loop.run(open_while_no_token())
        # a token made by another instance: the very next request needs it
        secret = secret_of(cli_here(env, "token", "create", "--name", "dyn", "--profile", "pj2", "--profile", "pj1"))
        loop.run(the_token_is_needed(secret))
        # a per-token override
        one = secret_of(cli_here(env, "token", "create", "--name", "dyn-one", "--profile", "pj1", "--max-jobs", "1"))
        loop.run(its_own_limit(one))
        cli_here(env, "token", "revoke", "dyn")
        assert loop.run(refused(secret)) == 401
        assert loop.run(refused(None)) == 401  # dyn-one is still active
        revoked = cli_here(env, "token", "revoke", "dyn-one")
        assert "no token is active" in revoked and "never reopen" in revoked  # says what state it is in
        assert loop.run(refused(None)) == 401  # no active token left: still closed (issue 38)
    finally:
        server.stop()

    async def cancel_queued() -> None:
        for job in (await app.jobs.list("queued", None, 1, 20)).items:
            await app.jobs.cancel(job.id, wait_seconds=0)

    loop.run(cancel_queued())


@pytest.mark.usefixtures("owner")
async def test_stdio_serve_profile_names_it_and_applies_its_defaults(app, database_url: str, files_dir: Path) -> None:
    src = await app.sources.create(title="Stdio prof", source_type="api")
    await app.documents.create_from_text(src.id, "Lighthouse keepers log the weather every hour.", title="Log")
    await app.profiles.create("stdio-p", "Lighthouse logs", [src.id], search_type="vector", match_count=1)
    env = server_env(database_url, files_dir)
    params = StdioServerParameters(command=ARCHIVIST, args=["serve", "--profile", "stdio-p"], env=env)
    async with Client(params) as c:
        search = next(t for t in (await c.list_tools()).tools if t.name == "search_knowledge_base")
        assert "stdio-p (Lighthouse logs)" in (search.description or "")
        r = await ok(c, "search_knowledge_base", query="lighthouse weather")
        assert r["profile"] == "stdio-p" and r["search_type"] == "vector" and r["count"] == 1
        assert {h["metadata"]["source_id"] for h in r["results"]} == {str(src.id)}
