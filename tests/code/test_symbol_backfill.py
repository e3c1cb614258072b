"""Code stored before the symbol table (sql/038) gets its symbols: a worker writes them at start-up, in
the background, from the stored text; once written, the next start has nothing to do (issue 36)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.app import Archivist, run_worker
from services.code.symbol_backfill import backfill_symbols

MODULE = "import shutil\n\n\ndef copy_tree(src, dst):\n    return shutil.copytree(src, dst)\n"
SYMBOL_TABLES = ("code_symbols", "code_references", "code_symbol_files")


async def _stored_before_symbols(app: Archivist, title: str, path: str) -> Any:
    """A code file as a knowledge base from before sql/038 holds it: chunks, no symbol rows."""
    source = await app.sources.create(title=title)
    stored = await app.documents.ingest(
        source.id, path, MODULE, "code", f"file:///repo/{path}", {"language": "python", "path": path}, embed=False
    )
    for table in SYMBOL_TABLES:
        await app.db.pool.execute(f"DELETE FROM {table} WHERE document_id = $1", stored.document.id)  # noqa: S608
    assert (await app.symbols.definitions("copy_tree", [source.id], 0, 20)).total == 0
    return source


@pytest.mark.usefixtures("owner")
async def test_a_worker_writes_the_symbols_of_older_code_at_start(app: Archivist) -> None:
    source = await _stored_before_symbols(app, "Older code", "tools/files.py")
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(app, stop, "backfill-test"))
    try:
        for _ in range(200):
            found = await app.symbols.definitions("copy_tree", [source.id], 0, 20)
            if found.total:
                break
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await worker
    assert [(h.qualified_name, h.line_start) for h in found.hits] == [("tools.files.copy_tree", 4)]
    uses = await app.symbols.references("copytree", [source.id], 0, 20)
    assert [h.line for h in uses.hits] == [5]
    assert await backfill_symbols(app.db) == 0  # done once: nothing left for the next start


@pytest.mark.usefixtures("owner")
async def test_a_file_rewritten_meanwhile_keeps_the_symbols_of_its_new_text(app: Archivist) -> None:
    source = await _stored_before_symbols(app, "Rewritten code", "tools/other.py")
    row = await app.db.pool.fetchrow(
        "SELECT id, source_id, content_hash, content, metadata FROM documents WHERE source_id = $1", source.id
    )
    await app.documents.ingest(  # a sync writes new content (and its symbols) after the backfill read the old
        source.id, "tools/other.py", MODULE.replace("copy_tree", "mirror"), "code", "file:///repo/tools/other.py",
        {"language": "python", "path": "tools/other.py"}, embed=False,
    )  # fmt: skip
    from services.code.symbol_backfill import _backfill_one

    assert await _backfill_one(app.db, row) == 0
    assert (await app.symbols.definitions("copy_tree", [source.id], 0, 20)).total == 0
    assert (await app.symbols.definitions("mirror", [source.id], 0, 20)).total == 1


@pytest.mark.usefixtures("owner")
async def test_code_indexed_before_qualified_references_gets_them(app: Archivist) -> None:
    """A file written under sql/038 (symbols, no qualified uses: `qualified` NULL) is written again."""
    source = await app.sources.create(title="Code of sql/038")
    stored = await app.documents.ingest(
        source.id, "m.py", MODULE, "code", "file:///repo/m.py", {"language": "python", "path": "m.py"}, embed=False
    )
    document = stored.document.id
    await app.db.pool.execute("DELETE FROM code_qualified_references WHERE document_id = $1", document)
    await app.db.pool.execute("UPDATE code_symbol_files SET qualified = NULL WHERE document_id = $1", document)
    assert (await app.symbols.references("shutil.copytree", [source.id], 0, 20)).total == 1  # by the name, meanwhile
    assert await backfill_symbols(app.db) == 1
    uses = await app.symbols.references("shutil.copytree", [source.id], 0, 20)
    assert [h.line for h in uses.hits] == [5]
    assert (await app.symbols.definitions("copy_tree", [source.id], 0, 20)).total == 1  # written once, not twice
