"""Git sources against real repositories served over smart HTTP on 127.0.0.1: what the first sync
ingests, that a later sync re-ingests only changed files, renames, deletes, document URLs, a private
repository's token (never stored), and the errors of bad arguments."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import asyncpg
import pytest
import pytest_asyncio

from models.jobs import CrawlJob
from server import build_server
from services.app import Archivist, Runtime
from services.errors import InvalidArgument, NotFound, PermissionDenied
from services.sync.cli import git_sync_command, sync_command
from services.sync.git import GitService
from services.sync.git.remote import GuardedPoolManager
from services.sync.git.tree import plan
from services.worker import run_worker
from tests.conftest import make_settings
from tests.git_server import GitServer
from tests.mcp_helpers import client_in_own_task, err, ok

TOKEN = "glpat-Sup3rSecretT0ken-x91"
BROWSE = "https://git.example/org/repo/blob/{commit}/{path}"

FILES = {
    "README.md": "# Project\n\nThe project indexes lighthouses along the coast.\n",
    "docs/guide.md": "# Guide\n\nInstall the lamp, then wind the clockwork rotation mechanism.\n",
    "docs/api.rst": "API\n===\n\nThe beacon endpoint returns the flash pattern of a lighthouse.\n",
    "src/app.py": "def flash_pattern(name):\n    '''The flash pattern of a lighthouse.'''\n    return name.upper()\n",
    ".gitignore": "build/\nsecret.md\n",
    "docs/.gitignore": "draft-*.md\n",
    "build/out.md": "# Build output\n\nGenerated, committed by mistake.\n",
    "secret.md": "# Secret\n\nIgnored by the root .gitignore.\n",
    "docs/draft-1.md": "# Draft\n\nIgnored by docs/.gitignore.\n",
    ".github/notes.md": "# Hidden\n\nIn a hidden folder.\n",
    "docs/.hidden.md": "# Hidden file\n\nA hidden file.\n",
    "logo.png": "not really an image",
}
SYNCED = {"README.md", "docs/guide.md", "docs/api.rst", "src/app.py"}


@pytest.fixture(scope="module")
def git_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitServer]:
    server = GitServer(tmp_path_factory.mktemp("repos"), TOKEN)
    yield server
    server.close()


@pytest_asyncio.fixture(scope="module")
async def git_app(database_url: str, files_dir: Path, embedder: Any) -> AsyncIterator[Archivist]:
    settings = make_settings(
        database_url,
        files_dir,
        git_allow_private=True,
        job_poll_seconds=0.1,
        job_heartbeat_seconds=0.5,
        job_stale_seconds=2.0,
    )
    app = await Archivist.open(settings, embedder)
    yield app
    await app.close()


class CountIngests:
    """Wraps documents.ingest_many: the paths handed to it, per sync."""

    def __init__(self, app: Archivist, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        original = app.documents.ingest_many

        async def counted(source_id: UUID, items: list[Any]) -> Any:
            self.paths += [item.metadata["path"] for item in items]
            return await original(source_id, items)

        monkeypatch.setattr(app.documents, "ingest_many", counted)

    def take(self) -> list[str]:
        taken, self.paths = sorted(self.paths), []
        return taken


async def run_sync(app: Archivist, source_id: Any, status: str = "completed") -> CrawlJob:
    started = await app.git.queue(source_id)
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(app, stop, "git-test"))
    try:
        job = await app.jobs.wait(started.job.id, 60, interval=0.1)
    finally:
        stop.set()
        await task
    assert job.status == status, job
    return job


def counts(job: CrawlJob) -> tuple[int, int, int, int]:
    return job.documents_created, job.documents_updated, job.documents_unchanged, job.documents_deleted


async def stored(app: Archivist, source_id: UUID) -> dict[str, dict[str, Any]]:
    """path -> the document holding it (id, url, updated_at, metadata)."""
    rows = await app.db.pool.fetch(
        "SELECT g.path, d.id, d.url, d.updated_at, d.metadata FROM git_files g JOIN documents d "
        "ON d.id = g.document_id WHERE g.source_id = $1",
        source_id,
    )
    return {r["path"]: dict(r) for r in rows}


async def test_sync_adds_changes_renames_and_deletes(
    git_app: Archivist, git_server: GitServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = git_server.add("lights")
    first_commit = repo.commit(FILES, "first")
    ingests = CountIngests(git_app, monkeypatch)
    config, created = await git_app.git.bind(git_server.url("lights"), browse_url=BROWSE)
    assert created and config.ref == "HEAD"

    first = await run_sync(git_app, config.source_id)
    assert counts(first) == (4, 0, 0, 0), first.counters()
    assert ingests.take() == sorted(SYNCED)
    docs = await stored(git_app, config.source_id)
    assert set(docs) == SYNCED
    guide = docs["docs/guide.md"]
    assert guide["url"] == f"https://git.example/org/repo/blob/{first_commit}/docs/guide.md"
    assert guide["metadata"]["repository"] == git_server.url("lights")
    assert guide["metadata"]["path"] == "docs/guide.md" and guide["metadata"]["commit"] == first_commit
    code = await git_app.db.pool.fetch(
        "SELECT heading_path FROM chunks WHERE document_id = $1", docs["src/app.py"]["id"]
    )
    assert any("flash_pattern" in " ".join(r["heading_path"]) for r in code), code  # the tree-sitter chunker
    source = await git_app.sources.get(config.source_id)
    assert source.source_type == "git" and source.url == git_server.url("lights")
    assert source.metadata["kind"] == "git" and source.metadata["origin"] == git_server.url("lights")
    assert source.metadata["ref"] == "HEAD" and source.metadata["last_synced_commit"] == first_commit

    again = await run_sync(git_app, config.source_id)
    assert counts(again) == (0, 0, 0, 0) and ingests.take() == []

    second_commit = repo.commit({"docs/guide.md": "# Guide\n\nInstall the lamp, then trim the wick daily.\n"})
    job = await run_sync(git_app, config.source_id)
    assert counts(job) == (0, 1, 0, 0) and ingests.take() == ["docs/guide.md"]
    after = await stored(git_app, config.source_id)
    assert after["docs/guide.md"]["id"] == guide["id"]  # changed in place, same document
    assert after["docs/guide.md"]["url"].endswith(f"/{second_commit}/docs/guide.md")
    assert after["docs/guide.md"]["updated_at"] > guide["updated_at"]
    for path in SYNCED - {"docs/guide.md"}:
        assert after[path]["updated_at"] == docs[path]["updated_at"] and after[path]["url"] == docs[path]["url"]

    repo.rename("docs/api.rst", "reference/api.rst")  # same content
    repo.rename("src/app.py", "src/main.py", FILES["src/app.py"] + "\n\ndef dim():\n    return 0\n")  # and edited
    third_commit = repo.commit(
        {"README.md": None, "docs/new.md": "# New\n\nFog horns sound every thirty seconds.\n"}, "delete and add"
    )
    job = await run_sync(git_app, config.source_id)
    assert counts(job) == (1, 2, 0, 1), job.counters()  # new.md; api.rst, app.py moved; README.md deleted
    assert ingests.take() == ["docs/new.md", "src/main.py"]  # the unchanged rename was not re-embedded
    final = await stored(git_app, config.source_id)
    assert set(final) == {"docs/guide.md", "reference/api.rst", "src/main.py", "docs/new.md"}
    assert final["reference/api.rst"]["id"] == docs["docs/api.rst"]["id"]
    assert final["reference/api.rst"]["url"].endswith(f"/{third_commit}/reference/api.rst")
    assert final["reference/api.rst"]["metadata"]["path"] == "reference/api.rst"
    assert final["src/main.py"]["id"] == docs["src/app.py"]["id"]
    with pytest.raises(NotFound):
        await git_app.documents.get(docs["README.md"]["id"])
    hits = await git_app.search.search("how often do fog horns sound", config.source_id, 3)
    assert "thirty seconds" in hits.hits[0].text
    assert (await git_app.sources.get(config.source_id)).metadata["last_synced_commit"] == third_commit


async def test_git_plus_urls_patterns_and_ignore_changes(git_app: Archivist, git_server: GitServer) -> None:
    repo = git_server.add("patterned")
    commit = repo.commit(FILES, "first")
    url = git_server.url("patterned")
    config, _ = await git_app.git.bind(url, title="Patterned", include_patterns=["docs/**"])
    await run_sync(git_app, config.source_id)
    docs = await stored(git_app, config.source_id)
    assert set(docs) == {"docs/guide.md", "docs/api.rst"}
    assert docs["docs/guide.md"]["url"] == f"git+{url}@{commit}#docs/guide.md"
    # new patterns: every file is compared again
    config, created = await git_app.git.bind(url, include_patterns=["*.md"], exclude_patterns=["docs/guide.md"])
    assert not created
    job = await run_sync(git_app, config.source_id)
    assert counts(job) == (1, 0, 0, 2), job.counters()  # README.md in; guide.md and api.rst out
    # a changed .gitignore re-includes a file that did not change
    repo.commit({"docs/.gitignore": "draft-2.md\n"})
    job = await run_sync(git_app, config.source_id)
    assert counts(job) == (1, 0, 0, 0) and set(await stored(git_app, config.source_id)) == {
        "README.md",
        "docs/draft-1.md",
    }
    # a ref that does not exist fails the job, a branch is followed
    repo.repo.refs[b"refs/heads/stable"] = repo.repo.refs[b"refs/heads/master"]
    await git_app.git.bind(url, config.source_id, ref="no-such-branch")
    failed = await run_sync(git_app, config.source_id, "failed")
    assert "no ref 'no-such-branch'" in (failed.error or "")
    config, _ = await git_app.git.bind(url, config.source_id, ref="stable")
    assert counts(await run_sync(git_app, config.source_id)) == (0, 0, 0, 0)  # same files on that branch


async def table_texts(app: Archivist) -> str:
    """Every row of the tables a secret could leak into, as text."""
    texts = []
    for table in ("sources", "source_git", "crawl_jobs", "crawl_frontier", "documents", "audit_log", "git_files"):
        rows = await app.db.pool.fetch(f"SELECT t::text AS row FROM {table} t")
        texts += [r["row"] for r in rows]
    return "\n".join(texts)


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


def test_plan_pairs_renames_and_skips_what_is_stored() -> None:
    manifest = {"a.md": "1", "b.md": "2", "c.md": "3", "d.md": "4"}
    target = {"a.md": "1", "b.md": "22", "moved/c.md": "3", "e.md": "5", "f.md": "44"}
    result = plan(set(target) | set(manifest), target.get, manifest, renames={"f.md": "d.md"})
    # b changed; c moved as is (paired by blob); d renamed and edited (paired by the tree diff); e new
    assert result.files == [("b.md", None), ("e.md", None), ("f.md", "d.md"), ("moved/c.md", "c.md")]
    assert result.gone == []
    assert plan(["a.md", "gone.md"], target.get, {"a.md": "1", "gone.md": "9"}).gone == ["gone.md"]


def test_every_request_and_redirect_hop_is_checked() -> None:
    pool = GuardedPoolManager(allow_private=False, timeout=5)
    with pytest.raises(PermissionDenied, match="loopback"):
        pool.urlopen("GET", "http://127.0.0.1:9/repo.git/info/refs")
    with pytest.raises(PermissionDenied, match="http"):
        pool.urlopen("GET", "file:///etc/passwd")


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


async def test_handed_back_sync_resumes_the_same_commit(git_app: Archivist, git_server: GitServer) -> None:
    repo = git_server.add("many")
    commit = repo.commit(
        {f"n{i:03d}.md": f"# Note {i}\n\nNote {i} is about topic {i * 7919 % 1000}.\n" for i in range(70)}
    )
    config, _ = await git_app.git.bind(git_server.url("many"))
    started = await git_app.git.queue(config.source_id)
    stop = asyncio.Event()
    first = asyncio.create_task(run_worker(git_app, stop, "first"))
    while (await git_app.jobs.get(started.job.id)).pages_crawled < 1:
        await asyncio.sleep(0.05)
    stop.set()
    await first
    handed_back = await git_app.jobs.get(started.job.id)
    assert handed_back.status == "queued" and 0 < handed_back.pages_crawled < 70, handed_back
    repo.commit({"n000.md": None})  # a new commit meanwhile: the resumed job still syncs the one it planned
    stop = asyncio.Event()
    second = asyncio.create_task(run_worker(git_app, stop, "second"))
    job = await git_app.jobs.wait(started.job.id, 60, interval=0.1)
    stop.set()
    await second
    assert job.status == "completed" and counts(job) == (70, 0, 0, 0), job.counters()
    assert (await git_app.git.config(config.source_id)).last_commit == commit
    job = await run_sync(git_app, config.source_id)
    assert counts(job) == (0, 0, 0, 1)  # then the next sync takes the new commit


async def test_deleted_source_clone_is_removed(git_app: Archivist, git_server: GitServer) -> None:
    repo = git_server.add("shortlived")
    repo.commit({"a.md": "# A\n\nShort-lived repository.\n"})
    config, _ = await git_app.git.bind(git_server.url("shortlived"))
    await run_sync(git_app, config.source_id)
    clone = config.directory(git_app.settings.data_dir)
    assert (clone / "objects").is_dir()
    await git_app.sources.delete(config.source_id)
    assert await git_app.git.prune_clones() >= 1 and not clone.exists()


async def test_sync_commands(git_app: Archivist, git_server: GitServer, capsys: pytest.CaptureFixture[str]) -> None:
    repo = git_server.add("shell")
    repo.commit({"one.md": "# One\n\nSynced from the shell.\n", "two.md": "# Two\n\nAlso synced.\n"})
    await git_sync_command(git_app, git_server.url("shell"), title="Shell repo", include=["*.md"])
    assert "2 created, 0 updated, 0 unchanged, 0 deleted, 0 failed" in capsys.readouterr().out
    repo.commit({"two.md": None})
    await sync_command(git_app, "Shell repo")  # `archivist sync TITLE` finds git sources too
    out = capsys.readouterr().out
    assert "(HEAD): completed" in out and "0 created, 0 updated, 0 unchanged, 1 deleted" in out, out
