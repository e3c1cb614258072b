"""Packed references (sql/049, issue 36): a file's references are one row (its names, the lines of all of
them in one array), and a knowledge base holding a row per (file, name) is converted in place to exactly
the same answers."""

from __future__ import annotations

from typing import Any

import pytest

from services.app import Archivist
from services.code.symbol_store import packed
from services.code.symbols import extract
from services.core.database import migration_file

MODULE = (
    "import shutil\nimport shutil as sh\nfrom os import path\n\n\n"
    "def copy_tree(src, dst):\n    shutil.copytree(src, dst)\n    sh.copytree(src, dst)\n"
    "    return path.join(src, dst)\n\n\nclass Tree:\n    def grow(self, src):\n        return copy_tree(src, src)\n"
)
OTHER = "from shutil import copytree\n\n\ndef again(src):\n    copytree(src, src)\n    return copytree\n"
NAMES = ["shutil", "copytree", "sh", "path", "join", "src", "dst", "copy_tree", "self", "shutil.copytree", "os.path"]
#: the tables as sql/038 and sql/043 made them: a row per (file, name) and per (file, name, qualifier)
OLD_TABLES = """
DROP TABLE code_references; DROP TABLE code_qualified_references;
CREATE TABLE code_references (source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    document_id uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE, name text NOT NULL,
    lines integer[] NOT NULL, PRIMARY KEY (document_id, name, source_id));
CREATE INDEX code_references_name_idx ON code_references (name);
CREATE TABLE code_qualified_references (source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    document_id uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE, name text NOT NULL,
    qualifier text NOT NULL, lines integer[] NOT NULL, PRIMARY KEY (document_id, name, qualifier, source_id));
CREATE INDEX code_qualified_references_name_idx ON code_qualified_references (name);
"""


def test_packed_lines_end_where_each_group_ends() -> None:
    assert packed([[3, 5], [1], [2, 4, 9]]) == ([2, 3, 6], [3, 5, 1, 2, 4, 9])
    assert packed([]) == ([], [])


async def _answers(app: Archivist, source_id: Any, documents: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in NAMES:
        page = await app.symbols.references(name, [source_id], 0, 20)
        out[name] = [(h.path, h.line) for h in page.hits] + [("total", page.total)]
        found = await app.symbols.definitions(name.replace("shutil.", ""), [source_id], 0, 20)
        out[f"definitions {name}"] = [(h.path, h.line_start, h.qualified_name) for h in found.hits]
    for document in documents:
        out[str(document)] = await app.symbols.outline(document)
    return out


@pytest.mark.usefixtures("owner")
async def test_a_file_has_one_reference_row(app: Archivist) -> None:
    source = await app.sources.create(title="Packed references")
    stored = await app.documents.ingest(
        source.id, "m.py", MODULE, "code", "file:///repo/m.py", {"language": "python", "path": "m.py"}, embed=False
    )
    document = stored.document.id
    rows = await app.db.pool.fetch("SELECT names, ends, lines FROM code_references WHERE document_id = $1", document)
    assert len(rows) == 1
    symbols = extract(MODULE, "python", "m.py")
    names, ends, lines = rows[0]["names"], rows[0]["ends"], rows[0]["lines"]
    unpacked = {name: lines[(ends[i - 1] if i else 0) : ends[i]] for i, name in enumerate(names)}
    assert unpacked == symbols.references
    assert await app.db.pool.fetchval("SELECT count(*) FROM code_qualified_references WHERE document_id = $1", document)
    uses = await app.symbols.references("copytree", [source.id], 0, 20)
    assert [h.line for h in uses.hits] == [7, 8]
    qualified = await app.symbols.references("shutil.copytree", [source.id], 0, 20)
    assert [h.line for h in qualified.hits] == [7, 8]


@pytest.mark.usefixtures("owner")
async def test_rows_per_name_are_converted_in_place(app: Archivist) -> None:
    """sql/049 over the tables of sql/038 and sql/043 gives every query (references, definitions, outlines)
    the answers a fresh write gives."""
    source = await app.sources.create(title="Converted references")
    documents = {}
    for path, text in {"pkg/m.py": MODULE, "pkg/other.py": OTHER}.items():
        stored = await app.documents.ingest(
            source.id, path, text, "code", f"file:///repo/{path}", {"language": "python", "path": path}, embed=False
        )
        documents[path] = (stored.document.id, extract(text, "python", path))
    ids = [document for document, _ in documents.values()]
    expected = await _answers(app, source.id, ids)
    assert expected["copytree"][-1] == ("total", 5)
    assert [s["name"] for s in expected[str(ids[0])]["symbols"]] == ["copy_tree", "Tree", "grow"]
    async with app.db.pool.acquire() as conn, conn.transaction():
        await conn.execute(OLD_TABLES)
        for document, symbols in documents.values():
            rows = [(source.id, document, name, lines) for name, lines in symbols.references.items()]
            await conn.copy_records_to_table("code_references", records=rows)
            rows = [(source.id, document, n, q, lines) for (n, q), lines in symbols.qualified.items()]
            await conn.copy_records_to_table("code_qualified_references", records=rows)
        await conn.execute(migration_file("049").read_text())
    await app.db.pool.expire_connections()  # statements prepared against the tables before
    assert await _answers(app, source.id, ids) == expected
    assert await app.db.pool.fetchval("SELECT count(*) FROM code_references WHERE source_id = $1", source.id) == 2
