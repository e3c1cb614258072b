"""Qualified references (issue 36): `search_type="references"` for `shutil.copytree` keeps the uses whose
qualifier, resolved through the file's imports, is `shutil` (`shutil.copytree(...)`, `sh.copytree` after
`import shutil as sh`, `copytree(...)` after `from shutil import copytree`), checked against an oracle
built with Python's `ast` over the same files, through a real MCP client over a synced folder. A bare
name keeps matching every use."""

from __future__ import annotations

import ast
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.access.scope import Scope, use_scope
from services.app import Archivist, Runtime
from tests.code.test_symbol_tools import sync, write
from tests.conftest import make_settings
from tests.support.mcp_helpers import client_in_own_task, ok

FILES = {
    "app/a.py": (
        "import shutil\nimport shutil as sh\nfrom shutil import copytree\nfrom shutil import copytree as ct\n"
        "from pathlib import Path\nimport os.path\nfrom os.path import join as joined\n\n\n"
        "def run(src, dst, other, p):\n"
        "    shutil.copytree(src, dst)\n    sh.copytree(src, dst)\n    copytree(src, dst)\n    ct(src, dst)\n"
        "    other.copytree(src, dst)\n    p.read_text()\n    Path.read_text(p)\n    os.path.join(src, dst)\n"
        "    joined(src, dst)\n    return f(copytree=1)\n\n\ndef later(f=ct, *copytree, **sh):\n    return f\n"
    ),
    "app/b.py": (
        "import mylib\nimport pathlib\nfrom os import path\n\n\ndef copytree(src):\n    return src\n\n\ndef use(q):\n"
        "    copytree(1)\n    mylib.copytree(2)\n    pathlib.Path.read_text(q)\n    path.exists(q)\n"
        "    return mylib.shutil.copytree(3)\n"
    ),
    "app/c.py": "from app.b import copytree\n\n\ndef again():\n    return copytree(0)\n",
}
QUERIES = [
    "shutil.copytree", "sh.copytree", "b.copytree", "app.b.copytree", "mylib.copytree", "Path.read_text",
    "pathlib.Path.read_text", "os.path.join", "path.join", "os.path", "os.path.exists",
]  # fmt: skip


def _chain(node: ast.AST) -> list[str] | None:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        head = _chain(node.value)
        return head + [node.attr] if head is not None else None
    return None


def oracle(query: str) -> set[tuple[str, int]]:
    """Every (path, line) where the name is used with a qualifier ending with the query's, read with ast."""
    *qualifiers, name = query.split(".")

    def matches(qualifier: str) -> bool:
        parts = qualifier.split(".") if qualifier else []
        return len(parts) >= len(qualifiers) and parts[len(parts) - len(qualifiers) :] == qualifiers

    found = set()
    for path, text in FILES.items():
        tree = ast.parse(text)
        own = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        module = path.removesuffix(".py").replace("/", ".")
        bound: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    bound[alias.asname or parts[0]] = alias.name if alias.asname else parts[0]
                    found |= {
                        (path, node.lineno)
                        for i in range(1, len(parts))
                        if parts[i] == name and matches(".".join(parts[:i]))
                    }
            elif isinstance(node, ast.ImportFrom) and node.module:
                parts = node.module.split(".")
                found |= {
                    (path, node.lineno)
                    for i in range(1, len(parts))
                    if parts[i] == name and matches(".".join(parts[:i]))
                }
                for alias in node.names:
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                    if alias.name == name and matches(node.module):
                        found.add((path, node.lineno))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == name:
                chain = _chain(node.value)
                if chain and matches(".".join([bound.get(chain[0], chain[0]), *chain[1:]])):
                    found.add((path, node.end_lineno or node.lineno))
            elif isinstance(node, ast.Name) and node.id in bound and "." in bound[node.id]:
                qualifier, original = bound[node.id].rsplit(".", 1)
                if original == name and matches(qualifier):
                    found.add((path, node.lineno))
            elif isinstance(node, ast.Name) and node.id == name and name in own and matches(module):
                found.add((path, node.lineno))
    return found


@pytest_asyncio.fixture(scope="module")
async def qualified_app(database_url: str, files_dir: Path, embedder: Any) -> AsyncIterator[Archivist]:
    settings = make_settings(database_url, files_dir, job_poll_seconds=0.1, job_heartbeat_seconds=0.5)
    app = await Archivist.open(settings, embedder)
    yield app
    await app.close()


@pytest_asyncio.fixture(scope="module")
async def source(qualified_app: Archivist, files_dir: Path) -> str:
    root = files_dir / "qualified"
    write(root, FILES)
    with use_scope(Scope.owner()):
        bound, _ = await qualified_app.sync.bind(str(root), title="Qualified")
        await sync(qualified_app, bound.source_id)
    return str(bound.source_id)


@pytest_asyncio.fixture(scope="module")
async def client(qualified_app: Archivist, embedder: Any) -> AsyncIterator[Client]:
    settings = qualified_app.settings
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as c:
        yield c


async def uses(client: Client, query: str, source: str) -> set[tuple[str, int]]:
    found = await ok(
        client, "search_knowledge_base", query=query, search_type="references", source_id=source, match_count=20
    )
    assert found["total_matches"] == len(found["results"])
    return {(h["path"], h["line"]) for h in found["results"]}


@pytest.mark.parametrize("query", QUERIES)
async def test_qualified_references_match_the_ast_oracle(client: Client, source: str, query: str) -> None:
    expected = oracle(query)
    assert expected or query in ("sh.copytree",), query  # the oracle finds something for all but an alias
    assert await uses(client, query, source) == expected


async def test_a_bare_name_matches_every_use(client: Client, source: str) -> None:
    every = await uses(client, "copytree", source)
    assert ("app/a.py", 15) in every and ("app/b.py", 12) in every  # other.copytree, mylib.copytree
    qualified = await uses(client, "shutil.copytree", source)
    assert ("app/a.py", 15) not in qualified and ("app/a.py", 14) in qualified  # `ct(...)`: the alias resolved
    assert ("app/a.py", 14) not in every  # by its written name, the alias is another name
