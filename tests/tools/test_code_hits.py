"""Code answers say where (issue 29, point 3), through a real MCP client: a code result names its file
by its path inside the ingested folder or repository (as `path` and as the document title), gives the
1-based lines of the text it shows, and for a git source the commit and, with `browse_url`, a link to
the line."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.app import Archivist, Runtime
from tests.support.git_server import GitServer
from tests.support.git_support import run_sync
from tests.support.mcp_helpers import client_in_own_task, ok

pytest_plugins = ("tests.support.git_fixtures",)  # the git_server and git_app fixtures

FILLER = "\n".join(f"def helper_{i}(value):\n    return value + {i}\n\n" for i in range(40))
MIDDLEWARE = (
    '"""GZip middleware."""\n\nimport gzip\n\n\n' + FILLER + "\n\ndef compress_quillbody(body, level=9):\n"
    "    '''Compress a response body with gzip at the given level.'''\n"
    "    return gzip.compress(body, compresslevel=level)\n\n\n" + FILLER.replace("helper_", "tail_")
)
OTHER = '"""Another gzip module."""\n\ndef unpack(data):\n    return data\n'
FILES = {"starlette/middleware/gzip.py": MIDDLEWARE, "other/gzip.py": OTHER}
BROWSE = "https://git.example/org/repo/blob/{commit}/{path}"


@pytest_asyncio.fixture(scope="module")
async def client(git_app: Archivist, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(git_app.settings, runtime=Runtime(git_app.settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as c:
        yield c


def check_lines(hit: dict[str, Any], content: str) -> None:
    """The window's text is the file's, and its lines are the file's lines (1-based, inclusive)."""
    assert hit["text"] == content[hit["char_start"] : hit["char_end"]]
    assert hit["line_start"] == content.count("\n", 0, hit["char_start"]) + 1
    assert hit["line_end"] == hit["line_start"] + hit["text"].rstrip("\n").count("\n")
    lines = content.split("\n")
    wanted = next(i for i, line in enumerate(lines, 1) if "def compress_quillbody" in line)
    assert hit["line_start"] <= wanted <= hit["line_end"], (hit["line_start"], wanted, hit["line_end"])
    assert hit["line_start"] > 40  # deep in the file: not the first chunk's lines


async def test_a_folder_ingest_names_the_file_and_its_lines(client: Client, files_dir: Path) -> None:
    root = files_dir / "project"
    for path, text in FILES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    created = await ok(client, "manage_document", action="create", title="Project code", file_path=str(root))
    assert created["files_ingested"] == 2
    found = await ok(client, "search_knowledge_base", query="compress_quillbody", source_id=created["source_id"])
    hit = found["results"][0]
    assert hit["document_title"] == hit["path"] == "starlette/middleware/gzip.py", hit
    check_lines(hit, MIDDLEWARE)
    assert "commit" not in hit
    other = await ok(client, "search_knowledge_base", query="unpack data", source_id=created["source_id"])
    assert other["results"][0]["path"] == "other/gzip.py"
    prose = await ok(client, "manage_document", action="create", title="Notes", content="# Notes\n\nNo code here.")
    found = await ok(client, "search_knowledge_base", query="code", source_id=prose["source_id"])
    assert not {"path", "line_start", "line_end"} & set(found["results"][0])  # only code says where


@pytest.mark.usefixtures("owner")
async def test_a_git_source_gives_the_commit_and_a_link_to_the_line(
    client: Client, git_app: Archivist, git_server: GitServer
) -> None:
    repo = git_server.add("gzipper")
    commit = repo.commit(FILES, "first")
    config, _ = await git_app.git.bind(git_server.url("gzipper"), browse_url=BROWSE)
    await run_sync(git_app, config.source_id)
    found = await ok(client, "search_knowledge_base", query="compress_quillbody", source_id=str(config.source_id))
    hit = found["results"][0]
    assert hit["document_title"] == hit["path"] == "starlette/middleware/gzip.py"
    check_lines(hit, MIDDLEWARE)
    assert hit["commit"] == commit
    page = f"https://git.example/org/repo/blob/{commit}/starlette/middleware/gzip.py"
    assert hit["metadata"]["url"] == f"{page}#L{hit['line_start']}"
    got = await ok(client, "manage_document", action="get", document_id=hit["document_id"])
    assert got["document"]["url"] == page  # the document's own url stays the file's
