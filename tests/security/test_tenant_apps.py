"""Issue 30, point 4: the new ways in (the MCP App's `ui://` resource, the usage guide's `skill://` files,
`skills/list` and `skills/get`) as a tenant confined to profile `pub`, through the SDK client over
streamable HTTP against a real `archivist serve --http`: each passes the one gate (access/guard.py), so it
runs in the token's scope, is audited under the token's name, and counts against its rate limit."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp.client.extension import advertise
from mcp.shared.exceptions import MCPError

from services.access.scope import Scope, use_scope
from tests.security.support import World, audit_rows, bearer_transport, build_world, http_server
from tests.support.mcp_helpers import call, client_in_own_task
from tests.tools.test_mcp_skills import SKILL_URI, SKILLS, skills_get, skills_list

APP_URI = "ui://archivist/app"


@pytest_asyncio.fixture(scope="module")
async def world(app: Any) -> World:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        return await build_world(app)


@pytest_asyncio.fixture(scope="module")
async def url(world: World, database_url: str, files_dir: Path) -> AsyncIterator[str]:
    async with http_server(database_url, files_dir) as served:
        yield served


@pytest_asyncio.fixture(scope="module")
async def pub(url: str, world: World) -> AsyncIterator[Any]:
    async with client_in_own_task(bearer_transport(url, world.pub_secret), extensions=[advertise(SKILLS)]) as c:
        yield c


async def test_app_and_skill_reads_are_audited_as_the_token(pub: Any, app: Any) -> None:
    before = len(await audit_rows(app, "pub-reader", 0, "resources/read"))
    (page,) = (await pub.read_resource(APP_URI)).contents
    assert "McpApps" in page.text
    guide = (await pub.read_resource(SKILL_URI)).contents[0].text
    assert "# Using Archivist" in guide
    rows = await audit_rows(app, "pub-reader", before + 2, "resources/read")
    read = [(json.loads(a) if isinstance(a := r["arguments"], str) else a).get("uri") for r in rows[before:]]
    assert APP_URI in read and SKILL_URI in read, rows


async def test_skills_methods_are_audited_as_the_token(pub: Any, app: Any) -> None:
    listed = await skills_list(pub)
    assert listed["skills"][0]["uri"] == SKILL_URI
    assert (await skills_get(pub, SKILL_URI))["skill"]["uri"] == SKILL_URI
    assert await audit_rows(app, "pub-reader", 1, "skills/list")
    assert await audit_rows(app, "pub-reader", 1, "skills/get")


async def test_the_apps_tool_calls_stay_in_the_tokens_scope(pub: Any, world: World) -> None:
    """What the app asks for goes through the host as ordinary tool calls: a foreign passage or source
    reads as missing, exactly as for any other caller of the token."""
    passage = await call(pub, "manage_document", action="get", chunk_id=str(world.sec_chunk))
    source = await call(pub, "manage_source", action="get", source_id=str(world.sec_source))
    assert passage["error_code"] == source["error_code"] == "NOT_FOUND"
    found = await call(pub, "search_knowledge_base", query="salaries director porter")
    assert all(r["metadata"]["source_id"] != str(world.sec_source) for r in found["results"])


async def test_the_new_ways_in_count_against_the_rate_limit(app: Any, url: str) -> None:
    _, secret = await app.tokens.create("apps-limited", ["pub"], rate_per_minute=2)
    async with client_in_own_task(bearer_transport(url, secret), extensions=[advertise(SKILLS)]) as limited:
        await limited.read_resource(APP_URI)
        await skills_list(limited)
        with pytest.raises(MCPError) as refused:
            await limited.read_resource(SKILL_URI)
    assert refused.value.error.code == -32029 and refused.value.error.data["error_code"] == "RATE_LIMITED"
    rows = await audit_rows(app, "apps-limited", 3)
    assert [r["error_code"] for r in rows][-1] == "RATE_LIMITED", rows
