"""Definitions, references and outlines through a real MCP client (issue 36): over a synced folder,
after a sync that changes, renames and deletes files, and as a tenant whose token is confined to one
profile (a real `archivist serve --http`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
from mcp import Client

from server import build_server
from services.access.scope import Scope, use_scope
from services.app import Archivist, Runtime, run_worker
from tests.conftest import make_settings
from tests.security.support import bearer_transport, http_server
from tests.support.mcp_helpers import call, client_in_own_task, err, ok

SHUTIL = '''"""Utility functions for copying files."""

import os


def copytree(src, dst, symlinks=False):
    """Recursively copy a directory tree.

    The destination must not exist."""
    names = os.listdir(src)
    return _copy(names, dst)


def _copy(names, dst):
    return [copytree(n, dst) for n in names]


class Error(OSError):
    pass
'''
PATHLIB = '''class Path:
    """A path."""

    def read_text(self, encoding=None):
        """Open the file in text mode, read it, and close it."""
        return self.open().read()

    def copy(self, target):
        from shutil import copytree
        return copytree(self, target)
'''
TESTS = "import shutil\n\n\ndef test_copytree():\n    shutil.copytree('a', 'b')\n\n\ndef copytree():\n    pass\n"
README = "# Project\n\n## Install\n\nRun it.\n\n## Usage\n\nCall copytree.\n"
SECRET = "def copytree(src):\n    '''The secret copy.'''\n    return src\n"


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


@pytest_asyncio.fixture(scope="module")
async def sync_app(database_url: str, files_dir: Path, embedder: Any) -> AsyncIterator[Archivist]:
    settings = make_settings(database_url, files_dir, job_poll_seconds=0.1, job_heartbeat_seconds=0.5)
    app = await Archivist.open(settings, embedder)
    yield app
    await app.close()


async def sync(app: Archivist, source_id: Any) -> None:
    started = await app.sync.queue(source_id)
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(app, stop, "symbols-test"))
    try:
        job = await app.jobs.wait(started.job.id, 60, interval=0.1)
    finally:
        stop.set()
        await task
    assert job.status == "completed", job


@pytest_asyncio.fixture(scope="module")
async def sources(sync_app: Archivist, files_dir: Path) -> dict[str, str]:
    project, secret = files_dir / "project", files_dir / "secret"
    write(project, {"shutil.py": SHUTIL, "pathlib/__init__.py": PATHLIB, "test/test_shutil.py": TESTS})
    write(project, {"README.md": README})
    write(secret, {"vault.py": SECRET})
    with use_scope(Scope.owner()):
        alpha, _ = await sync_app.sync.bind(str(project), title="Project")
        beta, _ = await sync_app.sync.bind(str(secret), title="Vault")
        await sync(sync_app, alpha.source_id)
        await sync(sync_app, beta.source_id)
        await sync_app.profiles.create("project-only", "the project", [alpha.source_id])
    return {"project": str(alpha.source_id), "secret": str(beta.source_id)}


@pytest_asyncio.fixture(scope="module")
async def client(sync_app: Archivist, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(sync_app.settings, runtime=Runtime(sync_app.settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as c:
        yield c


def where(hit: dict[str, Any]) -> tuple[str, int]:
    return hit["path"], hit.get("line_start") or hit["line"]


async def test_definition_of_a_bare_name_gives_every_definition_best_qualified_first(
    client: Client, sources: dict[str, str]
) -> None:
    found = await ok(client, "search_knowledge_base", query="copytree", search_type="definition")
    got = [where(h) for h in found["results"]]
    assert got[0] == ("shutil.py", 6)  # public, outside tests, shallow: before the test file's own
    assert set(got) == {("shutil.py", 6), ("test/test_shutil.py", 8), ("vault.py", 1)}
    first = found["results"][0]
    assert first["line_end"] == 11 and first["match_type"] == "definition"
    assert first["symbol"] == {
        "name": "copytree",
        "kind": "function",
        "qualified_name": "shutil.copytree",
        "signature": "def copytree(src, dst, symlinks=False)",
    }
    assert first["text"] == "def copytree(src, dst, symlinks=False)\nRecursively copy a directory tree."
    assert found["total_matches"] == 3


async def test_definition_of_a_qualified_name(client: Client, sources: dict[str, str]) -> None:
    found = await ok(client, "search_knowledge_base", query="shutil.copytree", search_type="definition")
    assert [where(h) for h in found["results"]] == [("shutil.py", 6)]
    method = await ok(client, "search_knowledge_base", query="Path.read_text", search_type="definition")
    assert [where(h) for h in method["results"]] == [("pathlib/__init__.py", 4)]
    assert method["results"][0]["symbol"]["qualified_name"] == "pathlib.Path.read_text"
    assert method["results"][0]["symbol"]["parent"] == "pathlib.Path"
    nowhere = await ok(client, "search_knowledge_base", query="no_such_symbol_here", search_type="definition")
    assert nowhere["results"] == [] and nowhere["total_matches"] == 0
    by_library = await ok(client, "search_knowledge_base", query="copytree", search_type="definition", library="vault")
    assert [where(h) for h in by_library["results"]] == [("vault.py", 1)] and by_library["library"] == "Vault"
    bad = await err(client, "search_knowledge_base", "INVALID_ARGUMENT", query="copy tree", search_type="definition")
    assert "symbol" in bad["error"]


async def test_references_are_every_use_and_page_by_offset(client: Client, sources: dict[str, str]) -> None:
    found = await ok(
        client, "search_knowledge_base", query="copytree", search_type="references", source_id=sources["project"]
    )
    got = [(h["path"], h["line"]) for h in found["results"]]
    assert got == [
        ("pathlib/__init__.py", 9),
        ("pathlib/__init__.py", 10),
        ("shutil.py", 15),
        ("test/test_shutil.py", 5),
    ]
    assert found["total_matches"] == 4 and "next_offset" not in found
    assert found["results"][2]["text"] == "    return [copytree(n, dst) for n in names]"
    paged = await ok(
        client, "search_knowledge_base", query="copytree", search_type="references", match_count=2, offset=2,
        source_id=sources["project"],
    )  # fmt: skip
    assert [(h["path"], h["line"]) for h in paged["results"]] == got[2:]
    first = await ok(client, "search_knowledge_base", query="copytree", search_type="references", match_count=2)
    assert first["next_offset"] == 2
    wrong = await err(client, "search_knowledge_base", "INVALID_ARGUMENT", query="copytree", offset=2)
    assert "offset" in wrong["error"]


async def test_outline_of_a_code_file_and_of_prose(client: Client, sources: dict[str, str]) -> None:
    code = await ok(client, "manage_document", action="outline", source_id=sources["project"], path="shutil.py")
    symbols = code["outline"]["symbols"]
    assert [(s["name"], s["kind"], s["line_start"], s["line_end"]) for s in symbols] == [
        ("copytree", "function", 6, 11), ("_copy", "function", 14, 15), ("Error", "class", 18, 19),
    ]  # fmt: skip
    assert symbols[2]["signature"] == "class Error(OSError)"
    by_id = await ok(client, "manage_document", action="outline", document_id=code["document"]["id"])
    assert by_id["outline"] == code["outline"]
    prose = await ok(client, "manage_document", action="outline", source_id=sources["project"], path="README.md")
    assert [h["heading"] for h in prose["outline"]["headings"]] == ["Project", "Install", "Usage"]
    await err(client, "manage_document", "NOT_FOUND", action="outline", source_id=sources["project"], path="nope.py")


async def test_a_sync_that_changes_renames_and_deletes_files(
    client: Client, sync_app: Archivist, sources: dict[str, str], files_dir: Path
) -> None:
    project = files_dir / "project"
    (project / "shutil.py").rename(project / "shutil2.py")  # renamed, same content
    (project / "test" / "test_shutil.py").unlink()
    write(project, {"pathlib/__init__.py": "\n\n" + PATHLIB})  # changed: two lines lower
    with use_scope(Scope.owner()):
        await sync(sync_app, sources["project"])
    found = await ok(
        client, "search_knowledge_base", query="copytree", search_type="definition", source_id=sources["project"]
    )
    assert [where(h) for h in found["results"]] == [("shutil2.py", 6)]
    method = await ok(client, "search_knowledge_base", query="Path.read_text", search_type="definition")
    assert [where(h) for h in method["results"]] == [("pathlib/__init__.py", 6)]
    uses = await ok(
        client, "search_knowledge_base", query="copytree", search_type="references", source_id=sources["project"]
    )
    assert [(h["path"], h["line"]) for h in uses["results"]] == [
        ("pathlib/__init__.py", 11), ("pathlib/__init__.py", 12), ("shutil2.py", 15),
    ]  # fmt: skip
    outline = await ok(client, "manage_document", action="outline", source_id=sources["project"], path="shutil2.py")
    assert outline["outline"]["total_count"] == 3


@pytest_asyncio.fixture(scope="module")
async def tenant(
    sync_app: Archivist, sources: dict[str, str], database_url: str, files_dir: Path
) -> AsyncIterator[Client]:
    with use_scope(Scope.owner()):
        _, secret = await sync_app.tokens.create("project-reader", ["project-only"])
    async with http_server(database_url, files_dir) as url, client_in_own_task(bearer_transport(url, secret)) as c:
        yield c


async def test_a_scoped_tenant_sees_its_own_sources_symbols_only(tenant: Client, sources: dict[str, str]) -> None:
    found = await ok(tenant, "search_knowledge_base", query="copytree", search_type="definition")
    assert "vault.py" not in {h["path"] for h in found["results"]} and found["results"]
    assert {h["source_id"] for h in found["results"]} == {sources["project"]}
    uses = await ok(tenant, "search_knowledge_base", query="src", search_type="references")
    assert {h["source_id"] for h in uses["results"]} == {sources["project"]}
    foreign = await call(
        tenant, "search_knowledge_base", query="copytree", search_type="definition", source_id=sources["secret"]
    )
    assert foreign["error_code"] == "NOT_FOUND"
    outline = await call(tenant, "manage_document", action="outline", source_id=sources["secret"], path="vault.py")
    assert outline["error_code"] == "NOT_FOUND"
