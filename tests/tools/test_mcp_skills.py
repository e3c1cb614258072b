"""Issue 30, point 3: the usage guide through the skills extension, and as a resource, read by the SDK client.

A client that declares `io.modelcontextprotocol/skills` lists and gets the skill (the spec's entry: the
verbatim frontmatter and a complete manifest whose digests and sizes match what `resources/read` gives);
a client that does not is refused those methods but finds SKILL.md on the first page of `resources/list`
and in the server's instructions, and reads it. The MCP App's `ui://` resource is read the same way, and
the tools that name it keep their replies unchanged. `tools/list` stays under 7,000 characters.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
import yaml
from mcp import Client
from mcp.client.extension import advertise
from mcp.shared.exceptions import MCPError
from mcp.types import Request, RequestParams
from pydantic import ConfigDict, TypeAdapter

from server import build_server
from services.app import Runtime
from services.core.settings import Settings
from tests.support.mcp_helpers import client_in_own_task, ok

MODERN = "2026-07-28"
SKILLS = "io.modelcontextprotocol/skills"
UI = "io.modelcontextprotocol/ui"
SKILL_URI = "skill://archivist/SKILL.md"
APP_MIME = "text/html;profile=mcp-app"


class SkillsParams(RequestParams):
    model_config = ConfigDict(extra="allow")


class ListSkills(Request[SkillsParams | None, str]):
    method: str = "skills/list"
    params: SkillsParams | None = None


class GetSkill(Request[SkillsParams, str]):
    method: str = "skills/get"
    params: SkillsParams


async def skills_list(c: Client) -> dict[str, Any]:
    return await c.session.send_request(ListSkills(params=SkillsParams()), TypeAdapter(dict[str, Any]))


async def skills_get(c: Client, uri: str) -> dict[str, Any]:
    return await c.session.send_request(GetSkill(params=SkillsParams(uri=uri)), TypeAdapter(dict[str, Any]))


def server(settings: Settings, embedder: Any, **options: Any) -> Any:
    return build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False, **options)


@pytest_asyncio.fixture(scope="module")
async def declared(settings: Settings, embedder: Any) -> AsyncIterator[Client]:
    extensions = [advertise(SKILLS), advertise(UI, {"mimeTypes": [APP_MIME]})]
    async with client_in_own_task(server(settings, embedder), extensions=extensions) as c:  # probes discover
        yield c


async def test_a_declaring_client_lists_gets_and_verifies_the_skill(declared: Client) -> None:
    assert SKILLS in (declared.server_capabilities.extensions or {})
    listed = await skills_list(declared)
    assert listed["resultType"] == "complete" and listed["ttlMs"] > 0 and listed["cacheScope"] == "public"
    (entry,) = listed["skills"]
    got = await skills_get(declared, SKILL_URI)
    assert got["skill"] == entry and entry["uri"] == SKILL_URI
    assert entry["frontmatter"]["name"] == "archivist" == SKILL_URI.split("/")[-2]
    uris = [r["uri"] for r in entry["resources"]]
    assert SKILL_URI in uris and len(uris) == len(set(uris)) >= 5
    for item in entry["resources"]:  # the manifest is complete and verifiable: digest and size of each read
        text = (await declared.read_resource(item["uri"])).contents[0].text
        raw = text.encode("utf-8")
        assert item["digest"] == "sha256:" + hashlib.sha256(raw).hexdigest() and item["size"] == len(raw)
    skill = (await declared.read_resource(SKILL_URI)).contents[0]
    assert skill.mime_type == "text/markdown"
    assert yaml.safe_load(skill.text.split("---")[1]) == entry["frontmatter"]  # frontmatter verbatim
    for topic in ("search.md", "reading.md", "crawling.md", "versions.md", "flags.md"):
        assert topic in skill.text, topic
    with pytest.raises(MCPError) as unknown:
        await skills_get(declared, "skill://nothing/SKILL.md")
    assert unknown.value.error.code == -32602


async def test_a_client_without_the_extension_reads_the_guide_as_a_resource(settings: Settings, embedder: Any) -> None:
    for mode in ("auto", "legacy"):  # auto: server/discover, then 2026-07-28
        async with client_in_own_task(server(settings, embedder), mode=mode) as plain:
            with pytest.raises(MCPError) as refused:
                await skills_list(plain)
            assert refused.value.error.code in (-32021, -32601)  # not declared (or no extensions on the old wire)
            assert SKILL_URI in (plain.instructions or "")  # the spec's pointer from server instructions
            listed = await plain.list_resources()
            assert str(listed.resources[0].uri) == SKILL_URI and len(listed.resources) <= 20
            guide = (await plain.read_resource(SKILL_URI)).contents[0].text
            assert "# Using Archivist" in guide
            search = (await plain.read_resource("skill://archivist/references/search.md")).contents[0].text
            assert "rerank" in search


async def test_the_app_resource_and_tool_meta(declared: Client) -> None:
    tools = {t.name: t for t in (await declared.list_tools()).tools}
    uri = tools["search_knowledge_base"].meta["ui"]["resourceUri"]
    assert uri.startswith("ui://") and tools["manage_document"].meta["ui"]["resourceUri"] == uri
    assert UI in (declared.server_capabilities.extensions or {})
    (page,) = (await declared.read_resource(uri)).contents
    assert page.mime_type == APP_MIME and "<html" in page.text and "McpApps" in page.text
    assert "/*MCP_APPS_BRIDGE*/" not in page.text  # the bridge is inlined
    assert page.meta["ui"]["permissions"] == {"clipboardWrite": {}}


async def test_tools_list_stays_small(declared: Client) -> None:
    listed = await declared.list_tools()
    total = len(json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]))
    assert total < 7_000, total


async def test_results_are_the_same_json_with_or_without_apps(
    declared: Client, settings: Settings, embedder: Any
) -> None:
    source = await ok(declared, "manage_source", action="create", title="Apps parity")
    sid = source["source"]["id"]
    await ok(declared, "manage_document", action="create", source_id=sid, title="Kettle", content="The kettle boils.")
    with_apps = await ok(declared, "search_knowledge_base", query="kettle", source_id=sid)
    async with client_in_own_task(server(settings, embedder)) as plain:
        without = await ok(plain, "search_knowledge_base", query="kettle", source_id=sid)
    assert with_apps == without
