"""Slimmer code-navigation indexes (sql/061, issue 36 storage): grep's trigram index holds only the trigrams
grep asks for (no word-edge padding, no hashed multibyte ones), and the qualified references have no names
index of their own: every name of a file's qualified uses is one of its reference names (written so, and a
knowledge base from before is completed in place), so they are found through the references' index."""

from __future__ import annotations

from typing import Any

import pytest

from services.app import Archivist
from services.core.database import migration_file

ALIASED = "from shutil import copytree as ct\n\n\ndef mirror(a, b):\n    return ct(a, b)\n"
PLAIN = "import shutil\n\n\ndef again(a):\n    shutil.copytree(a, a)\n    return shutil\n"


async def _ingest(app: Archivist, title: str) -> tuple[Any, dict[str, Any]]:
    source = await app.sources.create(title=title)
    documents = {}
    for path, text in {"pkg/aliased.py": ALIASED, "pkg/plain.py": PLAIN}.items():
        stored = await app.documents.ingest(
            source.id, path, text, "code", f"file:///repo/{path}", {"language": "python", "path": path}, embed=False
        )
        documents[path] = stored.document.id
    return source, documents


async def _uses(app: Archivist, source_id: Any, query: str) -> list[tuple[str, int]]:
    page = await app.symbols.references(query, [source_id], 0, 20)
    return [(h.path, h.line) for h in page.hits]


async def test_the_trigram_index_holds_only_what_grep_asks_for(app: Archivist) -> None:
    trigrams = await app.db.pool.fetchval("SELECT code_trigrams('def assertEqual(self): café')")
    assert trigrams and all(" " not in t and not t.startswith("0x") for t in trigrams)
    assert {"ass", "ser", "equ", "elf", "caf"} <= set(trigrams)
    definition = await app.db.pool.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = 'code_blocks_words_idx'")
    assert "code_trigrams(text)" in definition


@pytest.mark.usefixtures("owner")
async def test_qualified_uses_are_found_through_the_reference_names(app: Archivist) -> None:
    source, documents = await _ingest(app, "Qualified through references")
    assert await app.db.pool.fetchval(
        "SELECT count(*) FROM pg_indexes WHERE indexname = 'code_qualified_reference_files_names_idx'"
    ) == 0  # fmt: skip
    for document in documents.values():  # each qualified use's name is a reference name of its file
        assert await app.db.pool.fetchval(
            "SELECT bool_and(r.names @> q.names) FROM code_qualified_references q "
            "JOIN code_references r ON r.document_id = q.document_id WHERE q.document_id = $1",
            document,
        )
    expected = [("pkg/aliased.py", 1), ("pkg/aliased.py", 5), ("pkg/plain.py", 5)]
    assert await _uses(app, source.id, "shutil.copytree") == expected


@pytest.mark.usefixtures("owner")
async def test_reference_rows_lacking_a_qualified_name_are_completed_in_place(app: Archivist) -> None:
    """Rows from before sql/061 that break the rule (a file's references without the name of one of its
    qualified uses, a file with qualified uses and no reference row) answer the same once converted."""
    source, documents = await _ingest(app, "Completed references")
    expected = await _uses(app, source.id, "shutil.copytree")
    plain = await _uses(app, source.id, "copytree")
    async with app.db.pool.acquire() as conn, conn.transaction():
        await conn.execute("DELETE FROM code_references WHERE document_id = $1", documents["pkg/aliased.py"])
        await conn.execute(
            "UPDATE code_references SET names = array['a', 'again'], ends = array[1, 1], lines = array[4] "
            "WHERE document_id = $1",
            documents["pkg/plain.py"],
        )
    assert await _uses(app, source.id, "shutil.copytree") == []  # the rule broken: not found
    async with app.db.pool.acquire() as conn, conn.transaction():
        await conn.execute(migration_file("061").read_text())
    await app.db.pool.expire_connections()
    assert await _uses(app, source.id, "shutil.copytree") == expected
    assert await _uses(app, source.id, "copytree") == []  # the names added have no lines of their own
    assert plain  # (a fresh write has them)
    assert await _uses(app, source.id, "a") == [("pkg/plain.py", 4)]
