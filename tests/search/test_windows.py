"""The passage shows the match (issue 29, point 2): a result's text is a window of at most 1,000
characters centred on the best-matching span, with its offsets; `get` by the result's chunk_id holds
that window and, with offset=char_start, opens at it. Through a real MCP client, and the pure
window functions on their own."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.app import Runtime
from services.search.window import keys, occurrences, stemmer_for, term_weights, window
from tests.support.mcp_helpers import client_in_own_task, ok

FILLER = (
    "The keepers walked the gallery at dusk, trimmed the wicks and wound the clockwork that turned the "
    "optic. Weather was logged every four hours in a ledger kept beside the stove. "
)
LATE = FILLER * 14 + "In the end the relief keeper wrote the word quillfeather9 in the ledger's margin. " + FILLER * 3


@pytest_asyncio.fixture(scope="module")
async def client(settings: Any, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as c:
        yield c


async def test_the_window_shows_a_late_match_and_get_opens_there(client: Client) -> None:
    created = await ok(client, "manage_document", action="create", title="Ledger", content=f"# Ledger\n\n{LATE}")
    content = f"# Ledger\n\n{LATE}"
    found = await ok(client, "search_knowledge_base", query="quillfeather9", source_id=created["source_id"])
    hit = found["results"][0]
    assert "quillfeather9" in hit["text"] and len(hit["text"]) <= 1000 and hit["truncated"] is True
    assert hit["text"] == content[hit["char_start"] : hit["char_end"]]
    middle = content.index("quillfeather9") - hit["char_start"]
    assert 200 < middle < len(hit["text"]) - 200  # centred, not at an edge
    near = await ok(client, "manage_document", action="get", chunk_id=hit["chunk_id"])
    assert hit["text"] in near["content"]["text"] and "quillfeather9" in near["chunk"]["text"]
    opened = await ok(client, "manage_document", action="get", chunk_id=hit["chunk_id"], offset=hit["char_start"])
    assert opened["content"]["offset"] == hit["char_start"] and opened["content"]["text"].startswith(hit["text"])
    assert "offset=char_start" in found["hint"]


def test_window_prefers_the_span_with_the_rarest_distinct_terms() -> None:
    stem = stemmer_for("english")
    text = "tide " * 150 + "the tide gauge statements " + "lamp " * 150
    wanted = {"tide", "gaug", "statement"}
    found = occurrences(text, wanted, stem)
    weights = term_weights([found, occurrences("tide tide", wanted, stem)])  # "tide" is in every passage
    shown = window(text, found, weights, 100)
    assert "tide gauge statements" in text[shown.start : shown.end] and shown.end - shown.start <= 100
    assert not text[shown.start : shown.end].startswith(" ") and text[shown.start - 1] == " "  # whole words


def test_short_text_is_shown_whole_and_no_match_shows_the_start() -> None:
    stem = stemmer_for("english")
    assert (window("short", [], {}, 100).start, window("short", [], {}, 100).end) == (0, 5)
    text = "word " * 100
    shown = window(text, occurrences(text, {"absent"}, stem), {}, 50)
    assert shown.start == 0 and shown.end <= 50


def test_names_match_whole_by_part_and_stemmed() -> None:
    stem = stemmer_for("english")
    assert {"mock.patch.object", "patch.object", "mock.patch", "mock", "patch", "object"} == keys(
        "mock.patch.object", stem
    )
    assert keys("Statements", stem) == {"statement"} and "dirs_exist_ok" in keys("dirs_exist_ok", stem)
    assert keys("tokio::spawn", stem) == {"tokio::spawn", "tokio", "spawn"}
    assert stemmer_for("simple")("Running") == "Running"  # no stemmer: words as they are


def test_each_word_is_stemmed_once_across_searches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snowball runs in pure Python (~0.1 ms a word) and every search stems every word of its passages:
    uncached, that was most of a search's time on a small knowledge base (bench/ab_latency.py)."""
    import snowballstemmer

    calls: list[str] = []
    real = snowballstemmer.stemmer

    class Counting:
        def __init__(self, name: str) -> None:
            self.inner = real(name)

        def stemWord(self, word: str) -> str:  # noqa: N802 - Snowball's name
            calls.append(word)
            return self.inner.stemWord(word)

    monkeypatch.setattr(snowballstemmer, "stemmer", Counting)
    stemmer_for.cache_clear()
    try:
        stem = stemmer_for("english")
        text = "The lighthouse keeper trims the lamp; the lamp lights the harbour. " * 20
        wanted = {"lamp", "harbour"}
        first = occurrences(text, wanted, stem)
        assert occurrences(text, wanted, stem) == first
        assert sorted(calls) == sorted({w.lower() for w in re.findall(r"\w+", text)})
    finally:
        stemmer_for.cache_clear()
