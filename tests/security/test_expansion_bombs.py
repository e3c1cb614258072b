"""The expansion bombs of issue 27, each through a real server path, under a memory and time limit.

A ~600-byte OpenAPI YAML whose example is a chain of aliases (it grew the server by more than 1 GB
when rendered): by file over MCP, by URL, in a crawl and in a folder. A 4.5 KB spec whose schemas
fan out through `allOf` (it pinned a thread for minutes). A 2 MB sitemap of DTD entities (hundreds of
MB, expanded on the event loop). A git tree naming its subtree ten times per level (10^8 paths listed
before the file limit applied) and a blob that inflates past the file cap. Each test measures this
process's peak RSS growth (the server runs in it), caps its address space so code without budgets
fails instead of exhausting the machine, and checks that the one item fails with a clear error in the
JSON contract while the job goes on and nothing already stored is lost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from dulwich.objects import Blob, Commit, Tree

from server import build_server
from services.access.scope import Scope, use_scope
from services.app import Archivist, Runtime
from services.core.errors import ServiceError
from services.core.settings import Settings
from tests.conftest import make_settings
from tests.crawl.test_crawl_jobs import crawl
from tests.security import bombs
from tests.security.bombs import MB, measured
from tests.support.fixture_site import FixtureSite, html_page
from tests.support.git_server import AUTHOR, BRANCH, GitServer, Repository
from tests.support.git_support import run_sync, stored
from tests.support.mcp_helpers import client_in_own_task, err, ok

pytest_plugins = ("tests.support.git_fixtures",)  # git_server

#: Peak RSS growth allowed while a bomb is handled (the server's own work on the good items included).
MAX_GROWTH_MB = 60
SYNC_FILES = 25


@pytest.fixture(scope="module")
def bomb_settings(database_url: str, files_dir: Path) -> Settings:
    return make_settings(
        database_url,
        files_dir,
        crawl_delay_seconds=0,
        crawl_page_timeout=5.0,
        job_poll_seconds=0.1,
        job_heartbeat_seconds=0.5,
        job_stale_seconds=5.0,
        git_allow_private=True,
        sync_max_files=SYNC_FILES,
        max_file_mb=1.0,
        parse_workers=1,
    )


@pytest_asyncio.fixture(scope="module")
async def bomb_app(bomb_settings: Settings, embedder: Any) -> AsyncIterator[Archivist]:
    app = await Archivist.open(bomb_settings, embedder)
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        await app.documents.create_from_text((await app.sources.create("Warm-up")).id, "warm")
    yield app
    await app.close()


@pytest.fixture
def site() -> Iterator[FixtureSite]:
    with FixtureSite(with_defaults=False) as running:
        yield running


@pytest.fixture(autouse=True)
def address_space() -> Iterator[None]:
    with bombs.address_space(2048):
        yield


async def within(seconds: float, call: Any) -> Any:
    """`call` awaited for at most `seconds` (an unbudgeted parse fails the test by timing out)."""
    return await asyncio.wait_for(call, seconds)


# ---------------------------------------------------------------- YAML aliases in an OpenAPI spec


async def test_yaml_alias_spec_by_file_over_mcp(bomb_settings: Settings, embedder: Any, files_dir: Path) -> None:
    laughs, notes = files_dir / "laughs.yaml", files_dir / "after-laughs.md"
    laughs.write_text(bombs.yaml_alias_spec())
    notes.write_text("# After\n\nThe server still answers after the laughs.\n")
    assert laughs.stat().st_size < 700
    server = build_server(bomb_settings, runtime=Runtime(bomb_settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as client:
        first = await ok(client, "manage_document", action="create", title="Laughs by file", content="warm-up")
        source_id = first["source_id"]
        with measured() as cost:
            reply = await within(
                60,
                err(
                    client,
                    "manage_document",
                    "INVALID_ARGUMENT",
                    action="create",
                    source_id=source_id,
                    file_path=str(laughs),
                ),  # fmt: skip
            )
        assert cost.grew_mb < MAX_GROWTH_MB, f"the server grew by {cost.grew_mb:.0f} MB"
        assert "aliases" in reply["error"] and reply["suggestion"] and not reply["retryable"]
        after = await ok(client, "manage_document", action="create", source_id=source_id, file_path=str(notes))
        assert after["document"]["title"] == "After"


@pytest.mark.usefixtures("owner")
async def test_yaml_alias_spec_by_url_in_a_crawl_and_in_a_folder(
    bomb_app: Archivist, site: FixtureSite, files_dir: Path
) -> None:
    site.set_page("/laughs.yaml", bombs.yaml_alias_spec(), "application/yaml")
    site.set_page("/guide", html_page("Harbour guide", ["Moor at the north quay when the tide is high."]))
    links = [("/laughs.yaml", "API"), ("/guide", "Guide")]
    site.set_page("/", html_page("Harbour portal", ["The harbour's developer portal and its guide."], links))
    source = await bomb_app.sources.create("Laughs by URL")
    with measured() as cost:
        with pytest.raises(ServiceError) as refused:
            await within(60, bomb_app.documents.create_from_url(source.id, site.url_for("/laughs.yaml")))
        job = await within(120, crawl(bomb_app, site.url_for("/"), recursive=True, max_depth=1))
    assert cost.grew_mb < MAX_GROWTH_MB, f"the server grew by {cost.grew_mb:.0f} MB"
    assert "aliases" in refused.value.message and refused.value.suggestion
    assert job.status == "completed_with_errors" and job.pages_failed == 1, job
    assert any("aliases" in e.error and e.url.endswith("/laughs.yaml") for e in job.recent_errors), job.recent_errors
    titles = {r["title"] for r in await bomb_app.db.pool.fetch("SELECT title FROM documents WHERE source_id = $1",
                                                                job.source_id)}  # fmt: skip
    assert {"Harbour portal", "Harbour guide"} <= titles

    folder = files_dir / "laughs-folder"
    folder.mkdir()
    (folder / "laughs.yaml").write_text(bombs.yaml_alias_spec())
    (folder / "notes.md").write_text("# Notes\n\nStored although a spec beside it is a bomb.\n")
    with measured() as cost:
        results, failures, _ = await within(60, bomb_app.documents.create_from_directory(source.id, folder))
    assert cost.grew_mb < MAX_GROWTH_MB, f"the server grew by {cost.grew_mb:.0f} MB"
    assert [Path(f.path).name for f in failures] == ["laughs.yaml"] and "aliases" in failures[0].error
    assert [r.document.title for _, r in results] == ["Notes"]


# ---------------------------------------------------------------- allOf / $ref fan-out


@pytest.mark.usefixtures("owner")
async def test_allof_fanout_spec_stops_at_its_budget(bomb_app: Archivist, site: FixtureSite, files_dir: Path) -> None:
    spec = files_dir / "fanout.json"
    spec.write_text(bombs.fanout_spec())
    assert spec.stat().st_size < 5000
    site.set_page("/fanout.json", bombs.fanout_spec(), "application/json")
    source = await bomb_app.sources.create("Fan-out")
    for attempt in (
        bomb_app.documents.create_from_file(source.id, spec),
        bomb_app.documents.create_from_url(source.id, site.url_for("/fanout.json")),
    ):
        started = time.perf_counter()
        with pytest.raises(ServiceError) as refused:
            await within(60, attempt)
        assert time.perf_counter() - started < 30
        assert "schema nodes" in refused.value.message and "GET /ledger" in refused.value.message
        assert refused.value.suggestion and not refused.value.retryable
    assert await bomb_app.db.pool.fetchval("SELECT count(*) FROM documents WHERE source_id = $1", source.id) == 0


# ---------------------------------------------------------------- sitemap entities


@pytest.mark.usefixtures("owner")
async def test_sitemap_entities_are_never_expanded(bomb_app: Archivist, site: FixtureSite) -> None:
    site.set_page("/robots.txt", f"User-agent: *\nAllow: /\nSitemap: {site.url}/sitemap.xml\n", "text/plain")
    site.set_page("/sitemap.xml", bombs.entity_sitemap(), "application/xml")
    site.set_page("/", html_page("Lighthouse keepers", ["The keepers' log of the northern lighthouse."]))
    gaps: list[float] = []

    async def tick() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    try:
        with measured() as cost:
            job = await within(120, crawl(bomb_app, site.url_for("/"), recursive=True, max_depth=1))
    finally:
        ticker.cancel()
    assert cost.grew_mb < MAX_GROWTH_MB, f"the server grew by {cost.grew_mb:.0f} MB"
    assert max(gaps) < 0.5, f"the event loop stalled for {max(gaps):.2f} s"
    assert job.status == "completed" and job.documents_created == 1, job
    assert any("sitemap.xml" in w and "DTD" in w for w in job.warnings), job.warnings


# ---------------------------------------------------------------- git trees and blobs


def tree_of(repo: Repository, leaf: str, levels: int = 8, width: int = 10) -> Tree:
    """A tree naming its one subtree `width` times per level: width^levels paths, levels + 1 trees."""
    store = repo.repo.object_store
    blob = Blob.from_string(b"# Leaf\n\nOne leaf of a very wide tree.\n")
    store.add_object(blob)
    tree = Tree()
    tree.add(leaf.encode(), 0o100644, blob.id)
    store.add_object(tree)
    for _ in range(levels):
        parent = Tree()
        for index in range(width):
            parent.add(f"d{index}".encode(), 0o040000, tree.id)
        store.add_object(parent)
        tree = parent
    return tree


def commit_tree(repo: Repository, tree: Tree, message: str) -> str:
    """Commit `tree` as the branch's next commit."""
    found = Commit()
    found.tree = tree.id
    found.parents = [repo.repo.refs[BRANCH]] if BRANCH in repo.repo.refs else []
    found.author = found.committer = AUTHOR
    found.author_time = found.commit_time = int(time.time())
    found.author_timezone = found.commit_timezone = 0
    found.message = message.encode()
    repo.repo.object_store.add_object(found)
    repo.repo.refs[BRANCH] = found.id
    return found.id.decode()


@pytest.mark.usefixtures("owner")
async def test_git_tree_bomb_stops_at_the_file_limit(bomb_app: Archivist, git_server: GitServer) -> None:
    repo = git_server.add("wide")
    commit_tree(repo, tree_of(repo, "readme.md"), "10^8 readmes")
    config, _ = await bomb_app.git.bind(git_server.url("wide"), title="Wide tree")
    with measured() as cost:
        job = await within(120, run_sync(bomb_app, config.source_id))
    assert cost.grew_mb < MAX_GROWTH_MB + 40, f"the server grew by {cost.grew_mb:.0f} MB"  # 25 documents embedded
    assert job.status == "completed" and len(await stored(bomb_app, config.source_id)) == SYNC_FILES, job
    assert any(f"more than {SYNC_FILES} matching files" in w for w in job.warnings), job.warnings


@pytest.mark.usefixtures("owner")
async def test_git_tree_bomb_of_other_files_fails_and_keeps_what_is_stored(
    bomb_app: Archivist, git_server: GitServer
) -> None:
    repo = git_server.add("grown")
    repo.commit({"a.md": "# A\n\nThe first page.\n", "b.md": "# B\n\nThe second page.\n"})
    config, _ = await bomb_app.git.bind(git_server.url("grown"), title="Grown tree")
    await run_sync(bomb_app, config.source_id)
    before = await stored(bomb_app, config.source_id)
    root = repo.repo.object_store[repo.repo.object_store[repo.repo.refs[BRANCH]].tree]
    grown = Tree()
    for entry in root.iteritems():
        grown.add(entry.path, entry.mode, entry.sha)
    grown.add(b"wide", 0o040000, tree_of(repo, "data.bin").id)  # 10^8 files no parser takes
    repo.repo.object_store.add_object(grown)
    commit_tree(repo, grown, "a very wide folder")
    with measured() as cost:
        job = await within(120, run_sync(bomb_app, config.source_id, "failed"))
    assert cost.grew_mb < MAX_GROWTH_MB, f"the server grew by {cost.grew_mb:.0f} MB"
    assert "tree entries walked" in (job.error or ""), job
    assert await stored(bomb_app, config.source_id) == before  # nothing stored is lost


@pytest.mark.usefixtures("owner")
async def test_git_blob_over_the_cap_fails_from_its_header(bomb_app: Archivist, git_server: GitServer) -> None:
    repo = git_server.add("heavy")
    repo.commit({"notes.md": "# Notes\n\nA small file.\n", "zeros.md": "\0" * (48 * MB)})
    url = git_server.url("heavy")
    config, _ = await bomb_app.git.bind(url, title="Heavy blob", exclude_patterns=["zeros.md"])
    await run_sync(bomb_app, config.source_id)  # the fetch brings the blob; it is not read yet
    config, _ = await bomb_app.git.bind(url, config.source_id, exclude_patterns=[])
    with measured() as cost:
        job = await within(120, run_sync(bomb_app, config.source_id, "completed_with_errors"))  # one file failed
    assert cost.grew_mb < 30, f"the server grew by {cost.grew_mb:.0f} MB reading a blob over the cap"
    assert job.pages_failed == 1 and set(await stored(bomb_app, config.source_id)) == {"notes.md"}, job
    error = job.recent_errors[0]
    assert error.url == "zeros.md" and f"{48 * MB:,} bytes" in error.error, error
