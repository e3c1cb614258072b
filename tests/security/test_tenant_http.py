"""A token confined to profile `pub`, through the SDK client over streamable HTTP against a real
`archivist serve --http`, tries every door to profile `sec`'s source "Secret" and document "Salaries"."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp.shared.exceptions import MCPError

from services.access.scope import Scope, use_scope
from tests.security.support import (
    MISSING_ID,
    SEC_URL,
    World,
    all_resources,
    audit_rows,
    bearer_transport,
    build_world,
    http_server,
    random_id,
    rpc_error,
    same_refusal,
)
from tests.support.mcp_helpers import call, client_in_own_task


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
    async with client_in_own_task(bearer_transport(url, world.pub_secret)) as client:
        yield client


async def test_resources_list_shows_only_the_tokens_profile(pub: Any, world: World) -> None:
    listed = await all_resources(pub)
    names = {r.name for r in listed}
    uris = {str(r.uri) for r in listed}
    assert "Handbook" in names and "Public" in names
    assert "Secret" not in names and "Salaries" not in names
    assert f"archivist://documents/{world.sec_document}" not in uris
    assert f"archivist://sources/{world.sec_source}" not in uris


async def test_resource_read_of_a_foreign_document_reads_as_missing(pub: Any, world: World) -> None:
    own = await pub.read_resource(f"archivist://documents/{world.pub_document}")
    assert "kettle" in own.contents[0].text
    foreign = await rpc_error(pub.read_resource(f"archivist://documents/{world.sec_document}"))
    missing = await rpc_error(pub.read_resource(f"archivist://documents/{MISSING_ID}"))
    assert "310,000" not in foreign
    assert same_refusal(foreign, missing, str(world.sec_document), MISSING_ID), (foreign, missing)


async def test_resource_read_of_a_foreign_source_reads_as_missing(pub: Any, world: World) -> None:
    foreign = await rpc_error(pub.read_resource(f"archivist://sources/{world.sec_source}"))
    missing = await rpc_error(pub.read_resource(f"archivist://sources/{MISSING_ID}"))
    assert "Secret" not in foreign
    assert same_refusal(foreign, missing, str(world.sec_source), MISSING_ID), (foreign, missing)


async def test_get_by_url_is_scoped(pub: Any) -> None:
    foreign = await call(pub, "manage_document", action="get", url=SEC_URL)
    nowhere = "file:///srv/none/nothing.md"
    missing = await call(pub, "manage_document", action="get", url=nowhere)
    assert not foreign["success"] and foreign["error_code"] == missing["error_code"] == "NOT_FOUND", foreign
    assert same_refusal(json.dumps(foreign), json.dumps(missing), SEC_URL, nowhere)


async def test_get_by_chunk_id_is_scoped(pub: Any, world: World) -> None:
    foreign = await call(pub, "manage_document", action="get", chunk_id=str(world.sec_chunk))
    other = random_id()
    missing = await call(pub, "manage_document", action="get", chunk_id=other)
    assert not foreign["success"] and "310,000" not in json.dumps(foreign), foreign
    assert str(world.sec_document) not in json.dumps(foreign)
    assert same_refusal(json.dumps(foreign), json.dumps(missing), str(world.sec_chunk), other), (foreign, missing)


@pytest.mark.parametrize("version", ["9", "9.1", None])
async def test_a_foreign_library_is_no_oracle(pub: Any, version: str | None) -> None:
    extra = {"version": version} if version else {}
    foreign = await call(pub, "search_knowledge_base", query="pay", library="Secret", **extra)
    missing = await call(pub, "search_knowledge_base", query="pay", library="Nosuchlib", **extra)
    assert not foreign["success"], foreign
    assert "9.1" not in json.dumps(foreign) and "Available" not in foreign["error"]
    assert same_refusal(json.dumps(foreign), json.dumps(missing), "Secret", "Nosuchlib"), (foreign, missing)


async def test_version_lists_name_only_versions_in_scope(pub: Any) -> None:
    wrong = await call(pub, "search_knowledge_base", query="x", library="Shared", version="7")
    assert not wrong["success"] and "1.0" in wrong["error"], wrong
    assert "2.0" not in json.dumps(wrong)  # sec's version of the same library does not exist here
    right = await call(pub, "search_knowledge_base", query="x", library="Shared", version="2.0")
    assert not right["success"] and "2.0" not in right["error"].split("Available versions:")[-1]


async def test_every_gated_request_is_audited_as_the_token(pub: Any, app: Any, world: World) -> None:
    """Resource reads, resource/prompt listings: one audit record each, under the token's name (a
    server that offers no prompts or completions still gates and records the attempt)."""
    before = len(await audit_rows(app, "pub-reader", 0, "resources/"))
    await pub.list_resources()
    await pub.read_resource(f"archivist://documents/{world.pub_document}")
    with pytest.raises(MCPError):
        await pub.read_resource(f"archivist://documents/{MISSING_ID}")
    await pub.list_resource_templates()
    await pub.list_prompts()
    rows = await audit_rows(app, "pub-reader", before + 4, "resources/")
    for _ in range(50):  # rows of earlier calls may land late (the writer batches): wait for this call's last
        if "resources/templates/list" in [r["tool"] for r in rows[before:]]:
            break
        await asyncio.sleep(0.1)
        rows = await audit_rows(app, "pub-reader", before + 4, "resources/")
    tools = [r["tool"] for r in rows[before:]]
    assert tools.count("resources/list") >= 1 and tools.count("resources/read") >= 2, tools
    assert "resources/templates/list" in tools
    assert any(r["tool"] == "resources/read" and r["error_code"] == "NOT_FOUND" for r in rows[before:]), rows
    assert await audit_rows(app, "pub-reader", 1, "prompts/list")
