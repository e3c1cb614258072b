"""Helpers for calling Archivist tools through a real MCP client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import jsonschema
from mcp import Client

_schemas: dict[int, dict[str, Any]] = {}


async def output_schema(client: Client, tool: str) -> dict[str, Any] | None:
    """The tool's declared outputSchema (tools/list read once per client)."""
    if id(client) not in _schemas:
        _schemas[id(client)] = {t.name: t.output_schema for t in (await client.list_tools()).tools}
    return _schemas[id(client)].get(tool)


@asynccontextmanager
async def client_in_own_task(target: Any, **options: Any) -> AsyncIterator[Client]:
    """Open an MCP client inside one dedicated task (anyio cancel scopes must be entered and left
    by the same task; pytest-asyncio sets up and tears down module fixtures in different tasks)."""
    ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
    done = asyncio.Event()

    async def hold() -> None:
        try:
            async with Client(target, **options) as client:
                ready.set_result(client)
                await done.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    task = asyncio.create_task(hold())
    try:
        yield await ready
    finally:
        done.set()
        await asyncio.gather(task, return_exceptions=True)


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool; check the text is one JSON object agreeing with the protocol-level error flag,
    equal to structuredContent and valid against the tool's outputSchema (errors included); any
    further content blocks are resource links."""
    result = await client.call_tool(tool, arguments)
    assert result.content and result.content[0].type == "text", result.content
    assert all(block.type == "resource_link" for block in result.content[1:]), result.content
    payload = json.loads(result.content[0].text)
    assert isinstance(payload, dict)
    assert result.structured_content == payload
    schema = await output_schema(client, tool)
    if tool != "no_such_tool":
        assert schema is not None, f"{tool} declares no outputSchema"
        jsonschema.validate(payload, schema)
    assert payload["success"] is (not result.is_error), payload
    if not payload["success"]:
        assert payload["error"] and payload["suggestion"] and payload["error_code"], payload
        assert isinstance(payload["retryable"], bool)
        # the chat module's nested shape beside the contract's flat fields (tools/common.failure)
        detail = {"code": payload["error_code"], "message": payload["error"], "retryable": payload["retryable"]}
        assert payload.get("error_detail") == detail, payload
        assert "Traceback" not in json.dumps(payload)
    return payload


async def ok(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    payload = await call(client, tool, **arguments)
    assert payload["success"], payload
    return payload


async def err(client: Client, tool: str, code: str, **arguments: Any) -> dict[str, Any]:
    payload = await call(client, tool, **arguments)
    assert not payload["success"], payload
    assert payload["error_code"] == code, payload
    return payload
