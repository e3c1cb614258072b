"""One truth for what a search result holds: what agents and people are told (the skill, the README,
docs/tools.md and the tool's description) is checked against the field lists the hit shaper uses
(services/access/profile_settings.py), and a real hit through an MCP client against both."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.access.profile_settings import HIT_CORE, HIT_DEFAULT_FIELDS, HIT_OPTIONAL_FIELDS
from services.app import Runtime
from tests.support.mcp_helpers import client_in_own_task, ok
from tools import search_knowledge_base

ROOT = Path(__file__).resolve().parents[2]
ALWAYS = set(HIT_CORE) | set(HIT_DEFAULT_FIELDS) | {"metadata.url", "metadata.source_id", "metadata.chunk_index"}


def named(text: str) -> set[str]:
    return set(re.findall(r"`([a-z_.]+)`", text))


def test_the_skill_promises_only_default_fields_on_every_result() -> None:
    skill = (ROOT / "tools/guide/archivist/SKILL.md").read_text()
    promise = re.search(r"every result has (.+?);", skill, re.S)
    assert promise, "the skill says what every result has"
    assert named(promise.group(1)) and named(promise.group(1)) <= ALWAYS, promise.group(1)
    asked = re.search(r"ask for (.+?) with", skill, re.S)
    assert asked and named(asked.group(1)) <= set(HIT_OPTIONAL_FIELDS), asked


def test_the_readme_promises_only_default_fields() -> None:
    readme = (ROOT / "README.md").read_text()
    promise = re.search(r"each result carries its (.+?)\n", readme)
    assert promise, "the README's search example says what a result carries"
    words = set(re.findall(r"[a-z_.]+", promise.group(1))) - {"and"}
    assert words <= ALWAYS, words - ALWAYS


def test_the_reference_and_the_description_list_exactly_the_optional_fields() -> None:
    reference = (ROOT / "docs/tools.md").read_text()
    on_request = re.search(r"On request, `fields=\[\.\.\.\]`:(.+?)\n- ", reference, re.S)
    assert on_request, "docs/tools.md lists the fields given on request"
    assert named(on_request.group(1)) - {"chunk_index_end", "all"} == set(HIT_OPTIONAL_FIELDS)
    listed = re.search(r"fields: ([a-z_ ]+?) all\.", " ".join(search_knowledge_base.DESCRIPTION.split()))
    assert listed and listed.group(1).split() == list(HIT_OPTIONAL_FIELDS), listed


@pytest_asyncio.fixture(scope="module")
async def client(settings: Any, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as c:
        yield c


@pytest.mark.usefixtures("owner")
async def test_a_real_hit_has_what_the_skill_promises_and_optional_fields_only_on_request(client: Client) -> None:
    await ok(
        client,
        "manage_document",
        action="create",
        title="Harbour rules",
        url="https://harbour.example/rules",
        content="# Berths\n\nEvery berth is booked a day ahead through the harbour office.",
    )
    hit = (await ok(client, "search_knowledge_base", query="book a berth ahead", match_count=1))["results"][0]
    for name in ("chunk_id", "document_title", "metadata.url"):
        top, _, inner = name.partition(".")
        assert top in hit and (not inner or inner in hit[top]), (name, hit)
    assert not set(hit) & set(HIT_OPTIONAL_FIELDS), hit
    asked = await ok(client, "search_knowledge_base", query="book a berth ahead", match_count=1, fields=["all"])
    assert set(HIT_OPTIONAL_FIELDS) - {"chunk_ids", "freshness"} <= set(asked["results"][0]), asked["results"][0]
