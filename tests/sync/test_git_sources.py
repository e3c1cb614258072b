"""Git sources against real repositories served over smart HTTP on 127.0.0.1: what the first sync
ingests (.gitignore'd and hidden files skipped), that a later sync re-ingests only changed files,
renames keep their document, deletes remove it, document URLs, patterns, refs, hand-back."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any
from uuid import UUID

import pytest

from commands.sync import cli_sync
from services.app import Archivist, run_worker
from services.core.database import migration_file
from services.core.errors import NotFound
from services.sync.git.tree import plan
from tests.support.git_server import GitServer
from tests.support.git_support import counts, run_sync, stored

pytest_plugins = ("tests.support.git_fixtures",)  # the git_server and git_app fixtures

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


class CountIngests:
    """Wraps documents.ingest_many: the paths handed to it, per sync."""

    def __init__(self, app: Archivist, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        original = app.documents.ingest_many

        async def counted(source_id: UUID, items: list[Any], embed: bool = True) -> Any:
            self.paths += [item.metadata["path"] for item in items]
            return await original(source_id, items, embed=embed)

        monkeypatch.setattr(app.documents, "ingest_many", counted)

    def take(self) -> list[str]:
        taken, self.paths = sorted(self.paths), []
        return taken


@pytest.mark.usefixtures("owner")
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


@pytest.mark.usefixtures("owner")
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
    same, created = await git_app.git.bind(url)  # by URL, without a ref: the same source, its ref kept
    assert not created and same.source_id == config.source_id and same.ref == "stable"
    assert counts(await run_sync(git_app, config.source_id)) == (0, 0, 0, 0)  # same files on that branch


def test_plan_pairs_renames_and_skips_what_is_stored() -> None:
    manifest = {"a.md": "1", "b.md": "2", "c.md": "3", "d.md": "4"}
    target = {"a.md": "1", "b.md": "22", "moved/c.md": "3", "e.md": "5", "f.md": "44"}
    result = plan(set(target) | set(manifest), target.get, manifest, renames={"f.md": "d.md"})
    # b changed; c moved as is (paired by blob); d renamed and edited (paired by the tree diff); e new
    assert result.files == [("b.md", None), ("e.md", None), ("f.md", "d.md"), ("moved/c.md", "c.md")]
    assert result.gone == []
    assert plan(["a.md", "gone.md"], target.get, {"a.md": "1", "gone.md": "9"}).gone == ["gone.md"]


@pytest.mark.usefixtures("owner")
async def test_a_file_becomes_a_folder_and_back(git_app: Archivist, git_server: GitServer) -> None:
    repo = git_server.add("shapes")
    repo.commit({"notes.md": "# Notes\n\nA file first.\n", "keep.md": "# Keep\n\nStays.\n"})
    config, _ = await git_app.git.bind(git_server.url("shapes"))
    await run_sync(git_app, config.source_id)
    repo.commit({"notes.md": None, "notes.md/inside.md": "# Inside\n\nNow a folder.\n"})
    assert counts(await run_sync(git_app, config.source_id)) == (1, 0, 0, 1)
    repo.commit({"notes.md/inside.md": None, "notes.md": "# Notes\n\nA file again.\n"})
    assert counts(await run_sync(git_app, config.source_id)) == (1, 0, 0, 1)
    assert set(await stored(git_app, config.source_id)) == {"notes.md", "keep.md"}


@pytest.mark.usefixtures("owner")
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


@pytest.mark.usefixtures("owner")
async def test_deleted_source_clone_is_removed(git_app: Archivist, git_server: GitServer) -> None:
    repo = git_server.add("shortlived")
    repo.commit({"a.md": "# A\n\nShort-lived repository.\n"})
    config, _ = await git_app.git.bind(git_server.url("shortlived"))
    await run_sync(git_app, config.source_id)
    clone = config.directory(git_app.settings.data_dir)
    assert (clone / "objects").is_dir()
    await git_app.sources.delete(config.source_id)
    assert await git_app.git.prune_clones() >= 1 and not clone.exists()


def sync_args(*args: str) -> tuple[argparse.Namespace, asyncio.Event]:
    """`archivist sync ARGS` as the command line parses it."""
    from cli import build_parser

    return build_parser().parse_args(["sync", *args]), asyncio.Event()


@pytest.mark.usefixtures("owner")
async def test_sync_commands(git_app: Archivist, git_server: GitServer, capsys: pytest.CaptureFixture[str]) -> None:
    repo = git_server.add("shell")
    repo.commit({"one.md": "# One\n\nSynced from the shell.\n", "two.md": "# Two\n\nAlso synced.\n"})
    await cli_sync(git_app, *sync_args("--git", git_server.url("shell"), "--title", "Shell repo", "--include", "*.md"))
    assert "2 created, 0 updated, 0 unchanged, 0 deleted, 0 failed" in capsys.readouterr().out
    repo.commit({"two.md": None})
    await cli_sync(git_app, *sync_args("Shell repo"))  # `archivist sync TITLE` finds git sources too
    out = capsys.readouterr().out
    assert "(HEAD): completed" in out and "0 created, 0 updated, 0 unchanged, 1 deleted" in out, out


@pytest.mark.usefixtures("owner")
async def test_a_git_sync_queued_as_kind_sync_still_runs(git_app: Archivist, git_server: GitServer) -> None:
    """Before sql/032 a git sync was a job of kind 'sync'; the migration makes such rows 'git', so a job
    queued by an older version runs with the git runner (and still shows as a sync)."""
    repo = git_server.add("older")
    repo.commit({"README.md": "# Older\n\nQueued by an older version.\n"})
    config, _ = await git_app.git.bind(git_server.url("older"))
    queued = await git_app.jobs.insert(config.source_id, "git", {"url": config.url})
    await git_app.db.pool.execute("UPDATE crawl_jobs SET kind = 'sync' WHERE id = $1", queued.id)  # as it was
    await git_app.db.pool.execute(migration_file("032").read_text())
    assert (await git_app.jobs.get(queued.id)).kind == "git"
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(git_app, stop, "migrated"))
    try:
        job = await git_app.jobs.wait(queued.id, 60, interval=0.1)
    finally:
        stop.set()
        await task
    assert (job.status, job.shown_kind, job.documents_created) == ("completed", "sync", 1), job
    assert set(await stored(git_app, config.source_id)) == {"README.md"}
