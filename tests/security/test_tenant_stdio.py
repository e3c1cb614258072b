"""`archivist serve --profile pub` over stdio (and ARCHIVIST_PROFILES=pub), through the SDK's stdio
client: the server's own profile confines resources, get by url/chunk_id and library resolution
exactly as a token does over HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client, StdioServerParameters

from services.access.scope import Scope, use_scope
from tests.e2e.test_e2e import ARCHIVIST, server_env
from tests.security.support import (
    MISSING_ID,
    SEC_URL,
    World,
    all_resources,
    build_world,
    rpc_error,
    same_refusal,
)
from tests.support.mcp_helpers import call


@pytest_asyncio.fixture(scope="module")
async def world(app: Any) -> World:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        return await build_world(app)


@pytest.mark.parametrize("how", ["--profile", "ARCHIVIST_PROFILES"])
async def test_stdio_profile_confines_every_door(world: World, database_url: str, files_dir: Path, how: str) -> None:
    env = server_env(database_url, files_dir)
    args = ["serve", "--no-worker"]
    if how == "--profile":
        args += ["--profile", "pub"]
    else:
        env["ARCHIVIST_PROFILES"] = "pub"
    async with Client(StdioServerParameters(command=ARCHIVIST, args=args, env=env)) as client:
        names = {r.name for r in await all_resources(client)}
        assert "Handbook" in names and not names & {"Secret", "Salaries"}, names

        foreign = await rpc_error(client.read_resource(f"archivist://documents/{world.sec_document}"))
        missing = await rpc_error(client.read_resource(f"archivist://documents/{MISSING_ID}"))
        assert same_refusal(foreign, missing, str(world.sec_document), MISSING_ID), (foreign, missing)

        by_url = await call(client, "manage_document", action="get", url=SEC_URL)
        assert not by_url["success"] and by_url["error_code"] == "NOT_FOUND", by_url
        by_chunk = await call(client, "manage_document", action="get", chunk_id=str(world.sec_chunk))
        assert not by_chunk["success"] and str(world.sec_document) not in json.dumps(by_chunk), by_chunk

        library = await call(client, "search_knowledge_base", query="pay", library="Secret", version="9")
        nothing = await call(client, "search_knowledge_base", query="pay", library="Nosuchlib", version="9")
        assert same_refusal(json.dumps(library), json.dumps(nothing), "Secret", "Nosuchlib"), (library, nothing)
