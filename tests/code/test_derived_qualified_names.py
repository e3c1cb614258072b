"""Derived qualified names (sql/055, issue 36 storage): a definition stores its qualified name only when its
parent and name do not spell it, and every answer (definitions, outlines, documented names) is the one a
knowledge base holding every qualified name gives; such a knowledge base is converted in place."""

from __future__ import annotations

from typing import Any

import pytest

from services.app import Archivist
from services.code.symbol_store import stored_qualified, write_documented
from services.core.database import migration_file
from services.search.names import ENTRIES_SQL

FILES = {
    "pkg/tree.py": (
        "python",
        "import shutil\n\n\ndef copy_tree(src, dst):\n    shutil.copytree(src, dst)\n\n\n"
        "class Tree:\n    LIMIT = 3\n\n    def grow(self, src):\n        return copy_tree(src, src)\n\n"
        "    class Leaf:\n        def fall(self):\n            pass\n",
    ),
    "sync/mutex.go": (
        "go",
        "package sync\n\ntype Mutex struct { state int32 }\n\nfunc (m *Mutex) Lock() {\n\tm.lockSlow()\n}\n",
    ),
    "net/socket.cpp": (
        "cpp",
        "namespace net {\nclass Socket {\n public:\n  void send(int n) { write(n); }\n};\n}\n"
        "void net::Socket::close() { shutdown(); }\n",
    ),
}
NAMES = ["copy_tree", "Tree", "grow", "Tree.grow", "Leaf.fall", "fall", "LIMIT", "Mutex", "sync.Mutex", "Lock"]
NAMES += ["Socket", "send", "close", "net::Socket::close", "TaskGroup", "asyncio.TaskGroup", "create_task"]
DOCUMENTED = [["asyncio.TaskGroup", "asyncio.TaskGroup", "class", 0], ["TaskGroup", "tg", "class", 5]]
DOCUMENTED += [["asyncio.TaskGroup.create_task", "asyncio.TaskGroup.create_task", "method", 9]]
#: the stored names of code definitions (arrays of code_symbol_files, sql/060) and of documented names
NAMES_SQL = (
    "SELECT u.name, u.parent, u.qualified_name FROM code_symbol_files f CROSS JOIN LATERAL "
    "unnest(f.names, f.parents, f.qualified_names) AS u(name, parent, qualified_name) WHERE f.source_id = $1 "
    "UNION ALL SELECT name, parent, qualified_name FROM code_symbols WHERE source_id = $1"
)
DOCUMENTED_SQL = "SELECT name, parent, qualified_name FROM code_symbols WHERE source_id = $1"
#: every code definition's qualified name spelled out, as before sql/055
SPELL_ARRAYS = (
    "UPDATE code_symbol_files f SET qualified_names = ARRAY(SELECT code_qualified_name(u.name, u.parent, u.q) "
    "FROM unnest(f.names, f.parents, f.qualified_names) WITH ORDINALITY AS u(name, parent, q, n) ORDER BY u.n) "
    "WHERE f.names IS NOT NULL"
)
#: the table as it was before sql/055: every qualified name stored
SPELLED = (
    "ALTER TABLE code_symbols ALTER COLUMN qualified_name SET NOT NULL",
    "DROP FUNCTION code_qualified_name(text, text, text)",
)


def test_a_qualified_name_is_stored_only_when_parent_and_name_do_not_spell_it() -> None:
    assert stored_qualified("grow", "Tree", "Tree.grow") is None
    assert stored_qualified("Tree", None, "Tree") is None
    assert stored_qualified("Mutex", None, "sync.Mutex") == "sync.Mutex"
    assert stored_qualified("close", "net::Socket", "net::Socket::close") == "net::Socket::close"


def _rows(rows: list) -> list[tuple]:
    return sorted((tuple(r) for r in rows), key=repr)


async def _answers(app: Archivist, source_id: Any, documents: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in NAMES:
        page = await app.symbols.definitions(name, [source_id], 0, 20)
        out[name] = [(h.path, h.line_start, h.line_end, h.qualified_name, h.parent, h.kind) for h in page.hits]
    for document in documents:
        out[str(document)] = await app.symbols.outline(document)
    rows = await app.db.pool.fetch(ENTRIES_SQL, ["TaskGroup", "create_task"], [source_id], 100)
    out["documented"] = sorted((r["name"], r["qualified_name"], r["char_start"]) for r in rows)
    return out


@pytest.mark.usefixtures("owner")
async def test_answers_are_those_of_spelled_names_and_a_knowledge_base_converts_in_place(app: Archivist) -> None:
    source = await app.sources.create(title="Derived qualified names")
    documents = []
    for path, (language, text) in FILES.items():
        stored = await app.documents.ingest(
            source.id, path, text, "code", f"file:///repo/{path}", {"language": language, "path": path}, embed=False
        )
        documents.append(stored.document.id)
    page = await app.documents.ingest(source.id, "asyncio-task", "TaskGroup docs", "html", "https://d/asyncio-task")
    async with app.db.pool.acquire() as conn:
        await write_documented(conn, page.document.id, source.id, DOCUMENTED)
    stored_names = await app.db.pool.fetch(NAMES_SQL, source.id)
    documented = await app.db.pool.fetch(DOCUMENTED_SQL, source.id)
    kept = {r["qualified_name"] for r in stored_names if r["qualified_name"] is not None}
    assert kept == {"sync.Mutex", "net::Socket", "net::Socket::send", "net::Socket::close"} | {
        "asyncio.TaskGroup",
        "asyncio.TaskGroup.create_task",
    }
    assert sum(r["qualified_name"] is None for r in stored_names) >= 7
    answers = await _answers(app, source.id, documents)
    assert answers["Tree.grow"] == [("pkg/tree.py", 11, 12, "pkg.tree.Tree.grow", "pkg.tree.Tree", "method")]
    assert answers["fall"][0][3] == "pkg.tree.Tree.Leaf.fall"
    assert answers["sync.Mutex"][0][3] == "sync.Mutex"
    assert answers["documented"] == [
        ("TaskGroup", "TaskGroup", 5), ("TaskGroup", "asyncio.TaskGroup", 0),
        ("create_task", "asyncio.TaskGroup.create_task", 9),
    ]  # fmt: skip
    # the table as before sql/055 (every name spelled out): the same answers, then converted in place
    await app.db.pool.execute(
        "UPDATE code_symbols SET qualified_name = code_qualified_name(name, parent, qualified_name) "
        "WHERE qualified_name IS NULL"
    )
    await app.db.pool.execute(SPELL_ARRAYS)
    assert all(r["qualified_name"] is not None for r in await app.db.pool.fetch(NAMES_SQL, source.id))
    assert await _answers(app, source.id, documents) == answers
    async with app.db.pool.acquire() as conn, conn.transaction():
        for statement in SPELLED:
            await conn.execute(statement)
        await conn.execute(migration_file("055").read_text())
    await app.db.pool.expire_connections()  # statements prepared against the function before
    # the documented names (rows) are converted; code definitions are arrays since sql/060, stored as written
    assert _rows(await app.db.pool.fetch(DOCUMENTED_SQL, source.id)) == _rows(documented)
    assert await _answers(app, source.id, documents) == answers
