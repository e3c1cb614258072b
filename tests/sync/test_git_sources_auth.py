"""Git sources and secrets: a private repository's token comes from the variable named by auth_env,
is never stored, logged or shown, and is not sent on a redirect to another host; URLs and addresses
are checked on every request; the tool's errors name what is wrong."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from server import build_server
from services.app import Archivist, Runtime
from services.core.errors import InvalidArgument, PermissionDenied
from services.net.connector import PinnedPoolManager
from services.sync.git import GitService
from tests.conftest import make_settings
from tests.support.git_server import GitServer
from tests.support.git_support import TOKEN, run_sync
from tests.support.mcp_helpers import client_in_own_task, err, ok

pytest_plugins = ("tests.support.git_fixtures",)  # the git_server and git_app fixtures


async def table_texts(app: Archivist) -> str:
    """Every row of the tables a secret could leak into, as text."""
    texts = []
    for table in ("sources", "source_git", "crawl_jobs", "crawl_frontier", "documents", "audit_log", "git_files"):
        rows = await app.db.pool.fetch(f"SELECT t::text AS row FROM {table} t")
        texts += [r["row"] for r in rows]
    return "\n".join(texts)


@pytest.mark.usefixtures("owner")
async def test_private_repository_token_from_env(
    git_app: Archivist,
    git_server: GitServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    repo = git_server.add("private", private=True)
    repo.commit({"handbook.md": "# Handbook\n\nThe keeper logs the weather every four hours.\n"})
    url = git_server.url("private")
    monkeypatch.delenv("LIGHTHOUSE_TOKEN", raising=False)
    with pytest.raises(InvalidArgument, match="LIGHTHOUSE_TOKEN"):
        await git_app.git.bind(url, auth_env="LIGHTHOUSE_TOKEN")
    with pytest.raises(InvalidArgument, match="NAME of an environment variable") as pasted:
        await git_app.git.bind(url, auth_env=TOKEN)  # the token itself, by mistake: refused, never echoed
    assert TOKEN not in pasted.value.message + pasted.value.suggestion
    config, _ = await git_app.git.bind(url)  # no token: the fetch is refused
    failed = await run_sync(git_app, config.source_id, "failed")
    assert "needs authentication" in (failed.error or "")
    monkeypatch.setenv("LIGHTHOUSE_TOKEN", "wrong-token")
    await git_app.git.bind(url, auth_env="LIGHTHOUSE_TOKEN")
    failed = await run_sync(git_app, config.source_id, "failed")
    assert "refused" in (failed.error or "")
    monkeypatch.setenv("LIGHTHOUSE_TOKEN", TOKEN)
    job = await run_sync(git_app, config.source_id)
    assert job.documents_created == 1
    assert any(TOKEN in header or header.startswith("Basic ") for _, header in git_server.requests)
    assert (await git_app.sources.get(config.source_id)).metadata["auth_env"] == "LIGHTHOUSE_TOKEN"
    monkeypatch.delenv("LIGHTHOUSE_TOKEN")
    with pytest.raises(InvalidArgument, match="LIGHTHOUSE_TOKEN"):
        await git_app.git.queue(config.source_id)

    assert TOKEN not in await table_texts(git_app)
    assert TOKEN not in caplog.text
    clone = config.directory(git_app.settings.data_dir)
    assert all(TOKEN.encode() not in p.read_bytes() for p in clone.rglob("*") if p.is_file())


@pytest.mark.usefixtures("owner")
async def test_token_not_sent_on_a_redirect_to_another_host(
    git_app: Archivist, git_server: GitServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = git_server.add("vault", private=True)
    repo.commit({"vault.md": "# Vault\n\nThe spare lamp is in the vault.\n"})
    git_server.redirects["moved.git"] = git_server.url("vault")  # 127.0.0.1: another host than localhost
    monkeypatch.setenv("VAULT_TOKEN", TOKEN)
    moved = git_server.url("moved").replace("127.0.0.1", "localhost")
    config, _ = await git_app.git.bind(moved, auth_env="VAULT_TOKEN")
    git_server.requests.clear()
    failed = await run_sync(git_app, config.source_id, "failed")
    assert "needs authentication" in (failed.error or ""), failed
    sent = [(path, header) for path, header in git_server.requests]
    assert any(path.startswith("/moved.git/") and header for path, header in sent), sent  # to localhost: sent
    assert all(not header for path, header in sent if path.startswith("/vault.git/")), sent  # redirected: not


async def test_argument_checks_and_private_addresses(git_app: Archivist, git_server: GitServer) -> None:
    url = git_server.url("lights")
    for bad, message in (
        ("ftp://127.0.0.1/repo.git", "http"),
        ("http://user:secret@127.0.0.1/repo.git", "credentials"),
        ("https://127.0.0.1/repo.git?private_token=secret", "query"),
        ("", "required"),
    ):
        with pytest.raises(InvalidArgument, match=message):
            await git_app.git.bind(bad)
    with pytest.raises(InvalidArgument, match="ref"):
        await git_app.git.bind(url, ref="bad..ref")
    with pytest.raises(InvalidArgument, match="path"):
        await git_app.git.bind(url, browse_url="https://git.example/org/repo")
    strict = GitService(
        git_app.db, git_app.settings.model_copy(update={"git_allow_private": False}), git_app.sources, git_app.jobs
    )
    with pytest.raises(PermissionDenied, match="loopback"):
        await strict.bind(url)


def test_every_request_and_redirect_hop_is_checked() -> None:
    pool = PinnedPoolManager(allow_private=False)
    with pytest.raises(PermissionDenied, match="loopback") as refused:
        pool.urlopen("GET", "http://127.0.0.1:9/repo.git/info/refs")
    assert "ARCHIVIST_GIT_ALLOW_PRIVATE" in refused.value.suggestion
    with pytest.raises(PermissionDenied, match="http"):
        pool.urlopen("GET", "file:///etc/passwd")


async def test_crawl_website_sync_git_url(
    database_url: str, files_dir: Path, embedder: Any, git_server: GitServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = git_server.add("tooled", private=True)
    repo.commit({"guide.md": "# Keeper guide\n\nPolish the Fresnel lens every morning.\n"})
    monkeypatch.setenv("TOOL_TOKEN", TOKEN)
    settings = make_settings(database_url, files_dir, git_allow_private=True, run_worker=True, job_poll_seconds=0.1)
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder))
    async with client_in_own_task(server) as client:
        missing = await err(
            client,
            "crawl_website",
            "INVALID_ARGUMENT",
            action="sync",
            git_url=git_server.url("tooled"),
            auth_env="NO_SUCH_TOKEN_VAR",
        )
        assert "NO_SUCH_TOKEN_VAR" in missing["error"]
        bound = await ok(
            client,
            "crawl_website",
            action="sync",
            git_url=git_server.url("tooled"),
            auth_env="TOOL_TOKEN",
            wait_seconds=20,
        )
        assert bound["source_created"] and bound["crawl_job"]["status"] == "completed", bound
        assert bound["crawl_job"]["documents_created"] == 1
        source = await ok(client, "manage_source", action="get", source_id=bound["source_id"])
        assert source["source"]["source_type"] == "git" and source["source"]["metadata"]["kind"] == "git"
        assert source["source"]["metadata"]["last_synced_commit"] == repo.repo.head().decode()
        again = await ok(client, "crawl_website", action="recrawl", source_id=bound["source_id"], wait_seconds=20)
        assert again["crawl_job"]["kind"] == "sync" and again["crawl_job"]["status"] == "completed", again
        assert TOKEN not in str(bound) + str(source) + str(again)
    conn = await asyncpg.connect(database_url)
    try:
        audit = await conn.fetch("SELECT arguments::text AS args FROM audit_log WHERE tool = 'crawl_website'")
    finally:
        await conn.close()
    assert any("TOOL_TOKEN" in r["args"] for r in audit) and all(TOKEN not in r["args"] for r in audit)
