"""What agents see (issue 21): unknown arguments refused, results that lead back to their text, the
tools-spec's search result, search controls and write replies with ids; through a real MCP client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.app import Runtime
from services.core.settings import Settings
from tests.conftest import make_settings
from tests.support.mcp_helpers import client_in_own_task, err, ok


@pytest.fixture(scope="module")
def small_chunks(database_url: str, files_dir: Path) -> Settings:
    """Chunks of ~400 characters, so a passage of three chunks is shown uncut."""
    return make_settings(database_url, files_dir, chunk_size=400, chunk_overlap=0)


@pytest.fixture(scope="module")
def runtime(small_chunks: Settings, embedder: Any) -> Runtime:
    return Runtime(small_chunks, embedder=embedder)


@pytest_asyncio.fixture(scope="module")
async def client(small_chunks: Settings, runtime: Runtime) -> AsyncIterator[Client]:
    server = build_server(small_chunks, runtime=runtime, run_worker=False)
    async with client_in_own_task(server) as c:
        yield c


# ---------- point 10: unknown arguments are refused ----------

CALLS = [
    ("search_knowledge_base", {"query": "otters", "sourceId": "x"}, "sourceId", "source_id"),
    ("search_knowledge_base", {"query": "otters", "match_cont": 3}, "match_cont", "match_count"),
    ("manage_document", {"action": "list", "per_pgae": 5}, "per_pgae", "per_page"),
    ("manage_document", {"action": "get", "documentId": "x"}, "documentId", "document_id"),
    ("manage_document", {"action": "create", "content": "x", "titel": "y"}, "titel", "title"),
    ("manage_document", {"action": "update", "document_id": "x", "contents": "y"}, "contents", "content"),
    ("manage_document", {"action": "delete", "document_id": "x", "force": True}, "force", None),
    ("manage_source", {"action": "create", "title": "x", "descripton": "y"}, "descripton", "description"),
    ("manage_source", {"action": "get", "source-id": "x"}, "source-id", "source_id"),
    ("manage_source", {"action": "list", "pages": 2}, "pages", "page"),
    ("manage_source", {"action": "update", "source_id": "x", "Title": "y"}, "Title", "title"),
    ("manage_source", {"action": "delete", "source_id": "x", "cascade": True}, "cascade", None),
    ("crawl_website", {"action": "start", "url": "http://127.0.0.1/", "max_page": 3}, "max_page", "max_pages"),
    ("crawl_website", {"action": "status", "jobId": "x"}, "jobId", "job_id"),
    ("crawl_website", {"action": "list", "state": "running"}, "state", None),
    ("crawl_website", {"action": "cancel", "job_id": "x", "wait": 1}, "wait", "wait_seconds"),
    ("crawl_website", {"action": "recrawl", "source_id": "x", "depth": 2}, "depth", None),
    ("crawl_website", {"action": "sync", "folderPath": "/tmp"}, "folderPath", "folder_path"),
]


@pytest.mark.parametrize(("tool", "arguments", "unknown", "meant"), CALLS)
async def test_unknown_argument_is_refused_naming_the_closest(
    client: Client, tool: str, arguments: dict[str, Any], unknown: str, meant: str | None
) -> None:
    payload = await err(client, tool, "INVALID_ARGUMENT", **arguments)
    assert f"`{unknown}`" in payload["error"], payload
    if meant is not None:
        assert f"did you mean `{meant}`?" in payload["error"], payload
    assert "takes:" in payload["suggestion"]


async def test_unknown_argument_refused_before_anything_happens(client: Client) -> None:
    """A create with a misspelt argument stores nothing."""
    await err(client, "manage_document", "INVALID_ARGUMENT", action="create", title="Refused", content="x", metdata={})
    listed = await ok(client, "manage_source", action="list", title="Refused")
    assert listed["total_count"] == 0


# ---------- point 1: results lead back; the tools-spec's search result ----------

LIGHTHOUSE = (
    "# Lighthouses\n\n"
    "Lighthouses stand on headlands and reefs where ships once foundered. Their towers are built of stone, "
    "brick or cast iron, tapering so that storms slide past them. Keepers lived at the foot of the tower "
    "with their families and logged the weather every four hours through the night.\n\n"
    "The lamp room sits at the top, glazed on every side. Early lamps burned whale oil, later paraffin "
    "under a mantle, and finally electricity from a generator house beside the keepers' cottages. A clock "
    "mechanism, wound by hand, turned the whole optic on a bath of mercury.\n\n"
    "A Fresnel lens bends the lamp's light with concentric prisms of cut glass into one horizontal beam "
    "that reaches sailors thirty nautical miles away. Each lighthouse flashes its own character, so a "
    "navigator identifies the coast by counting seconds between the flashes of the Fresnel beam.\n"
)


def squeeze(text: str) -> str:
    return " ".join(text.replace("…", " ").split())


async def test_result_chunk_id_leads_back_to_the_matched_text(client: Client) -> None:
    created = await ok(client, "manage_document", action="create", title="Lights", content=LIGHTHOUSE)
    source_id = created["source_id"]
    found = await ok(
        client,
        "search_knowledge_base",
        query="Fresnel lens concentric prisms beam",
        source_id=source_id,
        fields=["chunk_ids"],
    )
    hit = found["results"][0]
    assert len(hit["chunk_ids"]) >= 2, hit  # a passage merged from several chunks
    assert hit["chunk_id"] in hit["chunk_ids"] and hit["chunk_id"] != hit["chunk_ids"][0]
    best = await ok(client, "manage_document", action="get", chunk_id=hit["chunk_id"])
    assert "Fresnel lens bends" in best["chunk"]["text"]  # the chunk that matched, not the passage's first
    assert squeeze(hit["text"]) in squeeze(best["content"]["text"])  # it holds the window the result showed
    opened = await ok(client, "manage_document", action="get", chunk_id=hit["chunk_id"], offset=hit["char_start"])
    assert opened["content"]["text"].startswith(hit["text"]) and opened["content"]["offset"] == hit["char_start"]


async def test_search_result_as_the_tools_spec_shows_it(client: Client) -> None:
    """tools-spec.md, search_knowledge_base, Response Format: every field, with its type."""
    created = await ok(
        client,
        "manage_document",
        action="create",
        title="Python Async Guide",
        url="https://docs.example.com/async",
        content="# Async\n\nPython async patterns: await coroutines inside an event loop with asyncio.",
    )
    payload = await ok(
        client,
        "search_knowledge_base",
        query="Python async patterns",
        source_id=created["source_id"],
        search_type="hybrid",
    )
    assert payload["success"] is True
    assert (payload["count"], payload["search_type"], payload["query"]) == (1, "hybrid", "Python async patterns")
    result = payload["results"][0]
    assert isinstance(result["chunk_id"], str) and result["document_id"] == created["document"]["id"]
    assert result["document_title"] == "Python Async Guide"
    assert isinstance(result["text"], str) and len(result["text"]) <= 1000
    assert isinstance(result["score"], float) and 0 <= result["score"] <= 1
    assert result["match_type"] in ("hybrid", "vector", "keyword")
    assert result["metadata"] == {
        "source_id": created["source_id"],
        "chunk_index": 0,
        "url": "https://docs.example.com/async",
    }
    assert not {"source_id", "chunk_index", "url", "uri"} & set(result)  # each fact once: in metadata


# ---------- point 4: write replies with ids ----------


async def test_create_and_update_reply_with_chunk_ids_and_updated_fields(client: Client) -> None:
    created = await ok(client, "manage_document", action="create", title="Marsh birds", content=LIGHTHOUSE)
    document = created["document"]
    assert len(created["chunk_ids"]) == document["chunks_count"] == document["chunks_created"] > 1
    for index, chunk_id in enumerate(created["chunk_ids"]):
        got = await ok(client, "manage_document", action="get", chunk_id=chunk_id)
        assert (got["chunk"]["document_id"], got["chunk"]["chunk_index"]) == (document["id"], index)

    updated = await ok(
        client, "manage_document", action="update", document_id=document["id"], content="Herons wade at dawn."
    )
    assert updated["updated_fields"] == ["content"]
    assert len(updated["chunk_ids"]) == 1 and updated["chunk_ids"][0] not in created["chunk_ids"]
    retitled = await ok(
        client, "manage_document", action="update", document_id=document["id"], title="Herons",
        metadata={"season": "spring"}, url=None,
    )  # fmt: skip
    assert retitled["updated_fields"] == ["title", "metadata"]
    same = await ok(client, "manage_document", action="update", document_id=document["id"], title="Herons")
    assert same["updated_fields"] == [] and same["chunk_ids"] == retitled["chunk_ids"]


async def test_directory_ingest_reports_ids_found_and_skipped_with_reasons(client: Client, files_dir: Path) -> None:
    folder = files_dir / "mixed"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.md").write_text("# A\n\nAlpine meadows bloom in June.")
    (folder / "sub" / "b.txt").write_text("Bogs hold peat.")
    (folder / "c.rst").write_text("Cirques\n=======\n\nGlaciers carve cirques.")
    (folder / ".hidden.md").write_text("# Hidden\n\nNot for the index.")
    (folder / "image.bin").write_bytes(b"\x00\x01")
    reply = await ok(
        client, "manage_document", action="create", title="Mixed", file_path=str(folder), extensions=[".md", ".txt"]
    )
    assert (reply["files_found"], reply["files_ingested"], reply["files_failed"], reply["files_skipped"]) == (
        5,
        2,
        0,
        3,
    )
    assert reply["skipped_by_reason"] == {"hidden": 1, "extension not selected": 1, "unsupported type": 1}
    assert {(Path(s["path"]).name, s["reason"]) for s in reply["skipped"]} == {
        (".hidden.md", "hidden"),
        ("c.rst", "extension not selected"),
        ("image.bin", "unsupported type"),
    }
    assert reply["document_ids"] == [d["id"] for d in reply["documents"]] and len(reply["document_ids"]) == 2
    for document_id in reply["document_ids"]:
        await ok(client, "manage_document", action="get", document_id=document_id)


# ---------- point 3: search controls ----------


async def two_documents(client: Client, title: str) -> tuple[str, str, str]:
    """A source with a document that matches "sleepy cats nap" in meaning only, and one in words only."""
    meaning = await ok(
        client, "manage_document", action="create", title=title,
        content="Tired kittens doze and snooze in sunny windows all afternoon.",
    )  # fmt: skip
    words = await ok(
        client, "manage_document", action="create", source_id=meaning["source_id"], title="Router manual",
        content="Firmware 2.1: the CATS log module (Configurable Audit Trail Service) gained a NAP sleepy-timer.",
    )  # fmt: skip
    return meaning["source_id"], meaning["document"]["id"], words["document"]["id"]


async def test_keyword_search_and_keyword_weight(client: Client) -> None:
    source_id, by_meaning, by_words = await two_documents(client, "Cats")
    query = "sleepy cats nap"
    keyword = await ok(client, "search_knowledge_base", query=query, source_id=source_id, search_type="keyword")
    assert keyword["search_type"] == "keyword"
    assert [r["document_id"] for r in keyword["results"]] == [by_words]  # BM25 only: no term, no result
    assert keyword["results"][0]["match_type"] == "keyword" and keyword["results"][0]["score"] == 1.0
    vector = await ok(client, "search_knowledge_base", query=query, source_id=source_id, search_type="vector")
    assert vector["results"][0]["document_id"] == by_meaning

    ranked = {}
    for weight in (0.0, 1.0):
        found = await ok(client, "search_knowledge_base", query=query, source_id=source_id, keyword_weight=weight)
        ranked[weight] = found["results"][0]["document_id"]
    assert (ranked[0.0], ranked[1.0]) == (by_meaning, by_words)
    await err(client, "search_knowledge_base", "INVALID_ARGUMENT", query=query, keyword_weight=1.5)


async def test_source_ids_searches_exactly_those_sources(client: Client) -> None:
    ids = []
    for name in ("Fjords", "Deltas", "Atolls"):
        created = await ok(client, "manage_document", action="create", title=name, content=f"{name} shape coastlines.")
        ids.append(created["source_id"])
    found = await ok(client, "search_knowledge_base", query="coastlines", source_ids=ids[:2], match_count=20)
    assert {r["metadata"]["source_id"] for r in found["results"]} == set(ids[:2])
    both = await ok(client, "search_knowledge_base", query="coastlines", source_id=ids[2], source_ids=[ids[0]])
    assert {r["metadata"]["source_id"] for r in both["results"]} == {ids[0], ids[2]}
    missing = "00000000-0000-0000-0000-000000000000"
    await err(client, "search_knowledge_base", "NOT_FOUND", query="coastlines", source_ids=[ids[0], missing])


async def test_source_ids_scoped_like_source_id(client: Client, runtime: Runtime) -> None:
    inside = await ok(client, "manage_document", action="create", title="Inside", content="Lagoons are calm.")
    outside = await ok(client, "manage_document", action="create", title="Outside", content="Lagoons are calm too.")
    app = await runtime.get()
    await app.profiles.create("lagoons", "one source", [inside["source_id"]])
    scoped = await ok(
        client, "search_knowledge_base", query="lagoons", profile="lagoons", source_ids=[inside["source_id"]]
    )
    assert {r["metadata"]["source_id"] for r in scoped["results"]} == {inside["source_id"]}
    for arguments in ({"source_id": outside["source_id"]}, {"source_ids": [outside["source_id"]]}):
        await err(client, "search_knowledge_base", "NOT_FOUND", query="lagoons", profile="lagoons", **arguments)


async def test_profile_source_order_breaks_ties(client: Client, runtime: Runtime) -> None:
    """The same document in two sources scores the same: the profile's first source comes first."""
    a = (await ok(client, "manage_source", action="create", title="Tide tables A"))["source"]["id"]
    b = (await ok(client, "manage_source", action="create", title="Tide tables B"))["source"]["id"]
    text = "# Tides\n\nSpring tides follow the full and the new moon."
    for source_id in (a, b):
        await ok(client, "manage_document", action="create", source_id=source_id, title="Tides", content=text)
    app = await runtime.get()
    await app.profiles.create("tides-ab", "A first", [a, b])
    await app.profiles.create("tides-ba", "B first", [b, a])
    for profile, expected in (("tides-ab", [a, b]), ("tides-ba", [b, a])):
        for search_type in ("hybrid", "vector", "keyword"):
            found = await ok(
                client, "search_knowledge_base", query="spring tides moon", profile=profile, search_type=search_type
            )
            got = [r["metadata"]["source_id"] for r in found["results"]]
            assert got == expected, (profile, search_type, found["results"])
            assert found["results"][0]["score"] == found["results"][1]["score"]  # shown unboosted
