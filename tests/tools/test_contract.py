"""Issue 8 through the MCP SDK client (in-process): the tools-spec contract, reading long documents by
outline, chunk/url look-ups, resources, answer-ready context within a token budget, and sampling."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import CreateMessageRequestParams, CreateMessageResult, TextContent
from tokenizers import Tokenizer

from server import build_server
from services.app import Runtime
from tests.support.mcp_helpers import call, client_in_own_task, err, ok

SECTIONS = ["Glaciers", "Volcanoes", "Deserts", "Rivers", "Forests", "Oceans", "Tundra", "Wetlands"]


def section_text(name: str, size: int = 3700) -> str:
    sentence = f"The {name.lower()} section talks about {name.lower()} and nothing else. "
    body = (sentence * (size // len(sentence) + 1))[: size - len(name) - 8]
    return f"## {name}\n\n{body.rstrip()}\n\n"


LONG_DOC = "".join(section_text(s) for s in SECTIONS)


@pytest_asyncio.fixture(scope="module")
async def server(settings: Any, embedder: Any) -> Any:
    return build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)


@pytest_asyncio.fixture(scope="module")
async def client(server: Any) -> AsyncIterator[Client]:
    async with client_in_own_task(server) as c:
        yield c


@pytest_asyncio.fixture(scope="module")
async def long_doc(client: Client) -> dict[str, Any]:
    created = await ok(
        client, "manage_document", action="create", title="Biomes", content=LONG_DOC, url="https://example.org/biomes"
    )
    return created


def tokenizer_of(embedder: Any) -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(embedder.model_dir / "tokenizer.json"))
    tokenizer.no_truncation()
    return tokenizer


async def test_spec_pagination_test_as_written(client: Client, long_doc: dict[str, Any]) -> None:
    parsed = await ok(client, "manage_document", action="list", per_page=1000)
    assert parsed["per_page"] <= 20 and "note" in parsed
    sources = await ok(client, "manage_source", action="list", per_page=1000)
    assert sources["per_page"] <= 20
    jobs = await ok(client, "crawl_website", action="list", per_page=1000)
    assert jobs["per_page"] <= 20
    error = await call(client, "manage_source", action="invalid_action")
    assert error["success"] is False and isinstance(error["suggestion"], str)


async def test_source_items_carry_counts(client: Client, long_doc: dict[str, Any]) -> None:
    created = await ok(client, "manage_source", action="create", title="Counted")
    assert (created["source"]["documents_count"], created["source"]["chunks_count"]) == (0, 0)
    listed = await ok(client, "manage_source", action="list", per_page=20)
    biomes = next(s for s in listed["sources"] if s["id"] == long_doc["source_id"])
    assert biomes["documents_count"] == 1 and biomes["chunks_count"] == long_doc["document"]["chunks_count"] > 1
    assert all("documents_count" in s and "chunks_count" in s for s in listed["sources"])


async def test_long_document_read_section_by_section_in_eight_calls(client: Client, long_doc: dict[str, Any]) -> None:
    assert len(LONG_DOC) >= 29_000
    doc_id = long_doc["document"]["id"]
    calls = 1
    first = await ok(client, "manage_document", action="get", document_id=doc_id, max_chars=4000)
    outline = first["outline"]
    assert [h["heading"] for h in outline["headings"]] == SECTIONS and outline["has_more"] is False
    read = {first["content"]["heading_path"][-1]: first["content"]["text"]}
    for heading in outline["headings"][1:]:
        window = await ok(
            client, "manage_document", action="get", document_id=doc_id, offset=heading["heading"], max_chars=4000
        )
        calls += 1
        content = window["content"]
        assert content["offset"] == heading["offset"] and content["heading_path"] == [heading["heading"]]
        assert content["total_length"] == len(LONG_DOC)
        read[heading["heading"]] = content["text"]
    assert calls <= 8
    assert "".join(read[s] for s in SECTIONS) == LONG_DOC  # every section, whole, nothing else
    middle = await ok(client, "manage_document", action="get", document_id=doc_id, offset=5000, max_chars=60_000)
    assert middle["content"]["text"] == LONG_DOC[5000:] and "capped" in middle["note"]
    assert middle["content"]["next_offset"] is None and middle["content"]["heading_path"] == ["Volcanoes"]
    await err(client, "manage_document", "INVALID_ARGUMENT", action="get", document_id=doc_id, offset="Jungles")


async def test_outline_is_paged_twenty_at_a_time(client: Client) -> None:
    content = "".join(f"# Part {i}\n\nText of part {i}.\n\n" for i in range(45))
    doc = await ok(client, "manage_document", action="create", title="Parts", content=content)
    doc_id = doc["document"]["id"]
    pages = [await ok(client, "manage_document", action="get", document_id=doc_id, page=p) for p in (1, 2, 3)]
    counts = [len(p["outline"]["headings"]) for p in pages]
    assert counts == [20, 20, 5] and [p["outline"]["has_more"] for p in pages] == [True, True, False]
    assert pages[2]["outline"]["headings"][-1]["heading"] == "Part 44"
    part = await ok(client, "manage_document", action="get", document_id=doc_id, offset="part 30")
    assert part["content"]["text"] == "# Part 30\n\nText of part 30.\n\n"


async def test_get_by_chunk_id_and_by_url(client: Client, long_doc: dict[str, Any]) -> None:
    found = await ok(client, "search_knowledge_base", query="rivers section", source_id=long_doc["source_id"])
    hit = found["results"][0]
    got = await ok(client, "manage_document", action="get", chunk_id=hit["chunk_id"])
    chunk = got["chunk"]
    assert chunk["id"] == hit["chunk_id"] and got["document"]["id"] == long_doc["document"]["id"]
    assert LONG_DOC[chunk["char_start"] : chunk["char_end"]] == chunk["text"]
    if chunk["chunk_index"] > 0:
        before = await ok(client, "manage_document", action="get", chunk_id=chunk["previous_chunk_id"])
        assert before["chunk"]["chunk_index"] == chunk["chunk_index"] - 1
    after = await ok(client, "manage_document", action="get", chunk_id=chunk["next_chunk_id"])
    assert after["chunk"]["chunk_index"] == chunk["chunk_index"] + 1
    by_url = await ok(
        client, "manage_document", action="get", url="https://example.org/biomes", source_id=long_doc["source_id"]
    )
    assert by_url["document"]["id"] == long_doc["document"]["id"]
    await err(client, "manage_document", "NOT_FOUND", action="get", url="https://example.org/none")
    await err(client, "manage_document", "NOT_FOUND", action="get", chunk_id="00000000-0000-0000-0000-000000000000")


async def test_resources_list_read_and_links_resolve(client: Client, long_doc: dict[str, Any]) -> None:
    templates = await client.list_resource_templates()
    assert {t.uri_template.split("{")[0] for t in templates.resource_templates} == {
        "archivist://documents/",
        "archivist://sources/",
        "archivist://jobs/",
    }
    many = await ok(client, "manage_source", action="create", title="Many")
    for i in range(22):
        await ok(client, "manage_document", action="create", source_id=many["source"]["id"], content=f"Note {i}.")
    seen: list[str] = []
    cursor = None
    while True:
        page = await client.list_resources(cursor=cursor)
        assert len(page.resources) <= 20
        seen += [str(r.uri) for r in page.resources]
        cursor = page.next_cursor
        if not cursor:
            break
    doc_uri = f"archivist://documents/{long_doc['document']['id']}"
    assert doc_uri in seen and f"archivist://sources/{long_doc['source_id']}" in seen and len(seen) > 20
    assert len(seen) == len(set(seen))

    read = await client.read_resource(doc_uri)
    first = read.contents[0]  # whole: it fits one read (tests/tools/test_seed_asks.py pages a longer one)
    assert first.text == LONG_DOC and first.meta.get("next_offset") is None
    following = await client.read_resource(f"{doc_uri}?offset=4000")
    assert following.contents[0].text == LONG_DOC[4000:]
    for missing in ("archivist://documents/00000000-0000-0000-0000-000000000000", "archivist://sources/nope"):
        with pytest.raises(MCPError):
            await client.read_resource(missing)
    source = await client.read_resource(f"archivist://sources/{long_doc['source_id']}")
    assert json.loads(source.contents[0].text)["documents_count"] == 1

    result = await client.call_tool("search_knowledge_base", {"query": "volcanoes", "source_id": long_doc["source_id"]})
    links = [b for b in result.content if b.type == "resource_link"]
    assert links and str(links[0].uri) == doc_uri
    for link in links:
        assert (await client.read_resource(str(link.uri))).contents[0].text
    created = await client.call_tool("manage_document", {"action": "create", "title": "Linked", "content": "Moss."})
    link = next(b for b in created.content if b.type == "resource_link")
    assert (await client.read_resource(str(link.uri))).contents[0].text == "Moss."


async def test_max_tokens_packs_within_budget_and_merges_neighbours(
    client: Client, long_doc: dict[str, Any], embedder: Any
) -> None:
    tokenizer = tokenizer_of(embedder)
    text = "\n\n".join(
        f"Paragraph {i}: the lighthouse keeper polished the great lens and logged the ships passing the reef."
        for i in range(40)
    )
    doc = await ok(client, "manage_document", action="create", title="Lighthouse", content=text)
    sid = doc["source_id"]
    for budget in (60, 300, 1200):
        packed = await ok(
            client, "search_knowledge_base", query="lighthouse keeper lens ships", source_id=sid, max_tokens=budget
        )
        counted = sum(len(tokenizer.encode(p["text"], add_special_tokens=False).ids) for p in packed["passages"])
        assert packed["tokens_used"] == counted <= budget, (budget, counted)
        assert [p["n"] for p in packed["passages"]] == list(range(1, packed["count"] + 1))
        for p in packed["passages"]:
            c = p["citation"]
            assert c["document_title"] == "Lighthouse" and text[c["char_start"] : c["char_end"]] == p["text"]
    merged = [p for p in packed["passages"] if len(p["citation"]["chunk_ids"]) > 1]
    assert merged, "no neighbouring chunks were merged"
    assert len(merged[0]["text"]) > 1000  # longer than any single chunk
    assert "results" not in packed
    await err(client, "search_knowledge_base", "INVALID_ARGUMENT", query="x", max_tokens=10)


async def test_near_duplicates_are_dropped(client: Client) -> None:
    source = await ok(client, "manage_source", action="create", title="Dupes")
    sid = source["source"]["id"]
    body = "Saffron is harvested by hand from crocus flowers, three stigmas per flower."
    await ok(client, "manage_document", action="create", source_id=sid, content=body, title="Saffron A")
    await ok(client, "manage_document", action="create", source_id=sid, content=body + " Really.", title="Saffron B")
    packed = await ok(client, "search_knowledge_base", query="saffron harvest", source_id=sid, max_tokens=500)
    assert packed["count"] == 1


async def test_budget_stops_at_relevance(client: Client) -> None:
    """max_tokens leaves out passages far below the best one's score, whatever room is left (issue 29.5)."""
    source = await ok(client, "manage_source", action="create", title="Relevance")
    sid = source["source"]["id"]
    notes = {
        "Saffron": "Saffron is harvested by hand at dawn: pickers pluck the crocus flowers and pull out "
        "the three red stigmas of each, which are then dried over gentle heat.",
        "Knots": "A bowline makes a fixed loop that neither slips nor jams under load.",
        "Charts": "Soundings on a nautical chart are given at the lowest astronomical tide.",
        "Lamps": "The lamp room is glazed on every side and the lens turns on a bath of mercury.",
    }
    for title, body in notes.items():
        await ok(client, "manage_document", action="create", source_id=sid, content=body, title=title)
    packed = await ok(client, "search_knowledge_base", query="how is saffron harvested", source_id=sid, max_tokens=300)
    assert [p["citation"]["document_title"] for p in packed["passages"]] == ["Saffron"], packed["passages"]
    assert packed["tokens_used"] < 100 and packed["below_relevance"] >= 1


async def test_answer_with_sampling_client_and_without(settings: Any, embedder: Any, long_doc: dict[str, Any]) -> None:
    def server() -> Any:  # one server per connection: the in-process lifespan ends with its client
        return build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)

    asked: list[CreateMessageRequestParams] = []

    async def sampling_callback(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        asked.append(params)
        prompt = params.messages[0].content.text
        number = re.search(r"\[(\d+)\] Biomes > Deserts", prompt)
        assert number, prompt
        text = f"Deserts are discussed in the deserts section [{number.group(1)}]."
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=text), model="test-model")

    arguments = {"query": "deserts", "source_id": long_doc["source_id"], "answer": True, "max_tokens": 800}
    async with client_in_own_task(server(), sampling_callback=sampling_callback) as sampler:
        answered = await ok(sampler, "search_knowledge_base", **arguments)
    assert len(asked) == 1 and "cite" in (asked[0].system_prompt or "").lower()
    assert answered["answer"].startswith("Deserts are discussed") and answered["passages"]
    citation = answered["citations"][0]
    assert citation["heading_path"] == ["Deserts"] and citation["document_id"] == long_doc["document"]["id"]
    assert answered["tokens_used"] <= 800

    async with client_in_own_task(server(), sampling_callback=sampling_callback, mode="legacy") as legacy:
        legacy_answer = await ok(legacy, "search_knowledge_base", **arguments)  # sampling/createMessage mid-call
    assert len(asked) == 2 and legacy_answer["answer"] == answered["answer"]
    assert legacy_answer["citations"] == answered["citations"]

    async with client_in_own_task(server()) as plain:
        context_only = await ok(plain, "search_knowledge_base", **arguments)
    assert context_only["answer"] is None and "answer from the passages" in context_only["note"]
    assert context_only["passages"][0]["citation"]["heading_path"] == ["Deserts"]
