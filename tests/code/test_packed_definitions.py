"""Packed definitions (sql/060, issue 36 storage): a code file's definitions are arrays in its code_symbol_files
row, not a row each; definitions, outlines and documented names answer as the rows did, and a knowledge base
holding a row per definition is converted in place to the same answers."""

from __future__ import annotations

from typing import Any

import pytest

from services.app import Archivist
from services.code.symbol_store import stored_qualified, write_documented
from services.code.symbols import extract
from services.core.database import migration_file
from services.search.names import ENTRIES_SQL

FILES = {
    "pkg/tree.py": (
        "python",
        "import shutil\n\nX = Y = 1\n\n\ndef copy_tree(src, dst):\n    shutil.copytree(src, dst)\n\n\n"
        "class Tree:\n    LIMIT = 3\n\n    def grow(self, src):\n        return copy_tree(src, src)\n\n"
        "    def __init__(self):\n        pass\n\n"
        "    class Leaf:\n        def __init__(self):\n            pass\n\n        def fall(self):\n            pass\n",
    ),
    "pkg/other.py": (
        "python",
        "class Other:\n    def __init__(self):\n        self.grow = 1\n\n\ndef grow():\n    pass\n",
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
NAMES = ["copy_tree", "Tree", "grow", "Tree.grow", "Leaf.fall", "fall", "LIMIT", "X", "Y", "__init__", "Leaf.__init__"]
NAMES += ["Mutex", "sync.Mutex", "Lock", "Socket", "send", "close", "net::Socket::close", "TaskGroup", "create_task"]
NAMES += ["asyncio.TaskGroup", "missing"]
DOCUMENTED = [["asyncio.TaskGroup", "asyncio.TaskGroup", "class", 0], ["TaskGroup", "tg", "class", 5]]
DOCUMENTED += [["asyncio.TaskGroup.create_task", "asyncio.TaskGroup.create_task", "method", 9]]
#: the outline as it was read before sql/060 (a row per definition)
OLD_OUTLINE_SQL = (
    "SELECT name, kind, code_qualified_name(name, parent, qualified_name) AS qualified_name, parent, "
    "line_start, line_end, signature FROM code_symbols "
    "WHERE document_id = $1 AND anchor IS NULL ORDER BY line_start, line_end DESC"
)
#: a knowledge base as before sql/060: a row per definition, in file order, and no arrays
UNPACK = (
    "INSERT INTO code_symbols (source_id, document_id, name, kind, qualified_name, parent, line_start, line_end, "
    "signature, doc) SELECT f.source_id, f.document_id, u.name, u.kind, u.q, u.parent, u.line_start, u.line_end, "
    "u.signature, u.doc FROM code_symbol_files f CROSS JOIN LATERAL unnest(f.names, f.kinds, f.qualified_names, "
    "f.parents, f.line_starts, f.line_ends, f.signatures, f.docs) WITH ORDINALITY "
    "AS u(name, kind, q, parent, line_start, line_end, signature, doc, n) ORDER BY f.document_id, u.n",
    "DROP FUNCTION code_name_keys(text[]) CASCADE",
    "ALTER TABLE code_symbol_files DROP COLUMN names, DROP COLUMN kinds, DROP COLUMN parents, "
    "DROP COLUMN qualified_names, DROP COLUMN line_starts, DROP COLUMN line_ends, DROP COLUMN signatures, "
    "DROP COLUMN docs, RESET (toast_tuple_target)",
)


async def _ingest(app: Archivist, title: str) -> tuple[Any, list[Any]]:
    source = await app.sources.create(title=title)
    documents = []
    for path, (language, text) in FILES.items():
        stored = await app.documents.ingest(
            source.id, path, text, "code", f"file:///repo/{path}", {"language": language, "path": path}, embed=False
        )
        documents.append(stored.document.id)
    page = await app.documents.ingest(source.id, "asyncio-task", "TaskGroup docs", "html", "https://d/asyncio-task")
    async with app.db.pool.acquire() as conn:
        await write_documented(conn, page.document.id, source.id, DOCUMENTED)
    return source, documents


async def _answers(app: Archivist, source_id: Any, documents: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in NAMES:
        page = await app.symbols.definitions(name, [source_id], 0, 20)
        out[name] = [
            (h.path, h.line_start, h.line_end, h.qualified_name, h.parent, h.kind, h.signature, h.doc, h.anchor)
            for h in page.hits
        ] + [("total", page.total, page.notes)]
        second = await app.symbols.definitions(name, [source_id], 1, 1)
        out[f"{name} at 1"] = [(h.path, h.line_start, h.kind, h.signature) for h in second.hits]
    for document in documents:
        out[str(document)] = await app.symbols.outline(document)
    rows = await app.db.pool.fetch(ENTRIES_SQL, ["TaskGroup", "create_task"], [source_id], 100)
    out["documented"] = sorted((r["name"], r["qualified_name"], r["char_start"]) for r in rows)
    return out


@pytest.mark.usefixtures("owner")
async def test_a_code_file_has_its_definitions_in_one_row(app: Archivist) -> None:
    source, documents = await _ingest(app, "Packed definitions")
    assert await app.db.pool.fetchval(
        "SELECT count(*) FROM code_symbols WHERE source_id = $1 AND anchor IS NULL", source.id
    ) == 0  # fmt: skip
    row = await app.db.pool.fetchrow("SELECT * FROM code_symbol_files WHERE document_id = $1", documents[0])
    symbols = extract(FILES["pkg/tree.py"][1], "python", "pkg/tree.py")
    d = symbols.definitions
    assert row["names"] == [x.name for x in d] and row["definitions"] == len(d)
    assert row["kinds"] == [x.kind for x in d] and row["parents"] == [x.parent for x in d]
    assert row["line_starts"] == [x.line_start for x in d] and row["line_ends"] == [x.line_end for x in d]
    assert row["signatures"] == [x.signature for x in d] and row["docs"] == [x.doc for x in d]
    assert row["qualified_names"] is None  # every one spelled by parent and name
    go = await app.db.pool.fetchval(
        "SELECT qualified_names FROM code_symbol_files WHERE document_id = $1", documents[2]
    )
    assert go == [
        stored_qualified(x.name, x.parent, x.qualified_name) for x in extract(*FILES["sync/mutex.go"][::-1]).definitions
    ]
    answers = await _answers(app, source.id, documents)
    assert answers["Tree.grow"][0][:6] == ("pkg/tree.py", 13, 14, "pkg.tree.Tree.grow", "pkg.tree.Tree", "method")
    assert [hit[0:2] for hit in answers["__init__"][:-1]] == [
        ("pkg/other.py", 2),
        ("pkg/tree.py", 16),
        ("pkg/tree.py", 20),
    ]
    assert answers["Leaf.__init__"][0][3] == "pkg.tree.Tree.Leaf.__init__"
    assert answers["sync.Mutex"][0][3] == "sync.Mutex"
    assert answers["net::Socket::close"][0][3] == "net::Socket::close"
    assert sorted(hit[8] for hit in answers["TaskGroup"][:-1]) == ["asyncio.TaskGroup", "tg"]  # documented names
    assert answers["missing"] == [("total", 0, [])]
    outline = answers[str(documents[0])]["symbols"]
    assert [s["name"] for s in outline] == ["X", "Y", "copy_tree", "Tree", "LIMIT", "grow", "__init__", "Leaf"] + [
        "__init__", "fall",
    ]  # fmt: skip


@pytest.mark.usefixtures("owner")
async def test_rows_per_definition_are_converted_in_place(app: Archivist) -> None:
    """A knowledge base from before sql/060 (a row per definition) reads the same outlines through the old
    query as the packed rows give, and sql/060 converts it to exactly the answers a fresh write gives."""
    source, documents = await _ingest(app, "Definitions converted")
    expected = await _answers(app, source.id, documents)
    async with app.db.pool.acquire() as conn, conn.transaction():
        for statement in UNPACK:
            await conn.execute(statement)
    await app.db.pool.expire_connections()
    for document in documents:
        old = [dict(r) for r in await app.db.pool.fetch(OLD_OUTLINE_SQL, document)]
        for symbol in old:  # the path's module, as the reader puts it in front
            prefix = "pkg.tree." if document == documents[0] else "pkg.other." if document == documents[1] else ""
            symbol["qualified_name"] = prefix + symbol["qualified_name"]
            symbol["parent"] = prefix + symbol["parent"] if symbol["parent"] else None
        assert old == expected[str(document)]["symbols"]
    async with app.db.pool.acquire() as conn, conn.transaction():
        await conn.execute(migration_file("060").read_text())
    await app.db.pool.expire_connections()  # statements prepared against the tables before
    assert await _answers(app, source.id, documents) == expected
    assert await app.db.pool.fetchval("SELECT count(*) FROM code_symbols WHERE anchor IS NULL") == 0
    assert await app.db.pool.fetchval("SELECT count(*) FROM code_symbols WHERE source_id = $1", source.id) == 3
