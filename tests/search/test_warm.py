"""Warm after a restart (issue 37): the server reads the search indexes once in the background at
start, within a memory budget; the embedded server has no pg_prewarm, so it reads the relation files."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from services.access.scope import Scope, use_scope
from services.app import Archivist, Runtime
from services.search.warm import memory_budget, warm_search_indexes
from tests.conftest import make_settings


@pytest.fixture(scope="module")
async def stored(app: Archivist) -> None:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        source = await app.sources.create(title="Warm notes")
        for n in range(5):
            await app.documents.create_from_text(source.id, f"Note {n}: the lamp and its wick.", f"Note {n}")


@pytest.mark.usefixtures("owner", "stored")
async def test_the_search_indexes_are_read_within_the_budget(app: Archivist) -> None:
    warmed = await warm_search_indexes(app.db)
    assert warmed.method == "files"  # the embedded server ships no pg_prewarm
    assert warmed.relations[:2] == ["chunks_embedding_hnsw_idx", "term_blocks_term_idx"]
    assert warmed.bytes > 0 and warmed.bytes <= memory_budget()
    small = await warm_search_indexes(app.db, budget=warmed.bytes // 4)
    assert small.bytes <= warmed.bytes // 4 and small.skipped


@pytest.mark.usefixtures("owner", "stored")
async def test_the_server_warms_at_start(database_url: str, tmp_path: Path, embedder: Any) -> None:
    runtime = Runtime(make_settings(database_url, tmp_path), embedder=embedder)
    try:
        app = await runtime.get()
        assert app._warming is not None
        await asyncio.wait_for(app._warming, 60)
    finally:
        await runtime.close()
    quiet = Runtime(make_settings(database_url, tmp_path, warm_start=False), embedder=embedder)
    try:
        assert (await quiet.get())._warming is None
    finally:
        await quiet.close()
