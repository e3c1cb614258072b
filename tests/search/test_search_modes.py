"""Search modes of the profiles design (issue 32, point 3), through a real MCP client.

* `keyword_mode="all"`: only chunks holding every informative term (keyword search, and hybrid's
  keyword leg; with `hybrid_mode="filter"` every result).
* `hybrid_mode="filter"`: the keyword matches, in vector order (score = cosine similarity).
* `search_type="code"`: hybrid over code documents only; `search_type="question"`: hybrid.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.app import Runtime
from tests.support.mcp_helpers import client_in_own_task, err, ok

NOTES = {
    "Gauge at the harbour": "The tide gauge at the harbour records the water level every minute.",
    "Charts": "A tide table lists high and low water; charts show depths at low tide.",
    "Calibration": "Calibrate the pressure gauge against a reference before each season.",
    "Lamps": "The lamp room is glazed on every side and the lens turns on mercury.",
}
CODE = (
    '"""Tide tools."""\n\n\ndef read_tide_gauge(port):\n    """Read the tide gauge of a port."""\n'
    "    return port.level\n"
)


@pytest_asyncio.fixture(scope="module")
async def client(settings: Any, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as c:
        yield c


@pytest_asyncio.fixture(scope="module")
async def source(client: Client, files_dir: Path) -> str:
    created = await ok(client, "manage_source", action="create", title="Harbour")
    sid = created["source"]["id"]
    for title, text in NOTES.items():
        await ok(client, "manage_document", action="create", source_id=sid, title=title, content=text)
    (files_dir / "tides.py").write_text(CODE)
    await ok(client, "manage_document", action="create", source_id=sid, file_path=str(files_dir / "tides.py"))
    return sid


def titles(payload: dict[str, Any]) -> set[str]:
    return {r["document_title"] for r in payload["results"]}


async def test_keyword_mode_all_keeps_chunks_with_every_term(client: Client, source: str) -> None:
    anyone = await ok(client, "search_knowledge_base", query="tide gauge", source_id=source, search_type="keyword")
    assert {"Gauge at the harbour", "Charts", "Calibration"} <= titles(anyone)
    every = await ok(
        client, "search_knowledge_base", query="tide gauge", source_id=source, search_type="keyword", keyword_mode="all"
    )
    assert titles(every) == {"Gauge at the harbour", "tides.py"}
    strict = await ok(
        client, "search_knowledge_base", query="tide gauge", source_id=source, keyword_mode="all", hybrid_mode="filter"
    )
    assert titles(strict) == {"Gauge at the harbour", "tides.py"}


async def test_hybrid_filter_orders_keyword_matches_by_meaning(client: Client, source: str) -> None:
    query = "how high is the water in the harbour"
    found = await ok(
        client, "search_knowledge_base", query=query, source_id=source, hybrid_mode="filter", fields=["similarity"]
    )
    keyword = await ok(client, "search_knowledge_base", query=query, source_id=source, search_type="keyword")
    assert titles(found) == titles(keyword) and "Lamps" not in titles(found)  # keyword matches only
    similarities = [r["similarity"] for r in found["results"]]
    assert similarities == sorted(similarities, reverse=True)  # in vector order
    assert [r["score"] for r in found["results"]] == similarities
    weighted = await ok(client, "search_knowledge_base", query=query, source_id=source, hybrid_mode="weighted")
    assert "Lamps" in titles(weighted) or len(weighted["results"]) > len(found["results"])


async def test_code_search_keeps_code_and_question_is_hybrid(client: Client, source: str) -> None:
    code = await ok(client, "search_knowledge_base", query="tide gauge", source_id=source, search_type="code")
    assert titles(code) == {"tides.py"} and code["search_type"] == "code"
    assert code["results"][0]["path"] == "tides.py" and code["results"][0]["line_start"] >= 1
    question = await ok(
        client, "search_knowledge_base", query="where is the water level recorded", source_id=source,
        search_type="question",
    )  # fmt: skip
    hybrid = await ok(
        client, "search_knowledge_base", query="where is the water level recorded", source_id=source,
        search_type="hybrid",
    )  # fmt: skip
    assert [r["chunk_id"] for r in question["results"]] == [r["chunk_id"] for r in hybrid["results"]]


@pytest.mark.parametrize(
    ("arguments", "word"),
    [
        ({"keyword_mode": "most"}, "keyword_mode"),
        ({"hybrid_mode": "blend"}, "hybrid_mode"),
        ({"hybrid_mode": "filter", "search_type": "vector"}, "hybrid_mode"),
        ({"keyword_mode": "all", "search_type": "vector"}, "keyword_mode"),
    ],
)
async def test_modes_are_checked(client: Client, source: str, arguments: dict[str, str], word: str) -> None:
    failed = await err(client, "search_knowledge_base", "INVALID_ARGUMENT", query="tide", **arguments)
    assert word in failed["error"]
