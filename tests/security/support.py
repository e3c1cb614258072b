"""Shared pieces of the attack suite: two tenants' data, `archivist serve --http` (in a thread of the test),
real MCP clients, and ways to compare a refusal with the one for something that does not exist."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from services.access.scope import Scope, use_scope
from tests.e2e.test_e2e import server_env
from tests.support.served import served_async

PUB_URL = "file:///srv/pub/handbook.md"
SEC_URL = "file:///srv/sec/salaries.md"
SALARIES = "Salaries 2026: the director earns 310,000 and the night porter 41,000."
HANDBOOK = "Handbook: the office opens at nine and the kettle is in the second kitchen."
MISSING_ID = "00000000-0000-4000-8000-000000000000"


@dataclass
class World:
    """Profile `pub` (source "Public" + "Shared" 1.0) and profile `sec` (source "Secret" 9.1 with the
    document "Salaries", + "Shared" 2.0); a token confined to `pub`."""

    pub_source: UUID
    sec_source: UUID
    pub_document: UUID
    sec_document: UUID
    sec_chunk: UUID
    pub_secret: str


async def build_world(app: Any, rate: int | None = None) -> World:
    with use_scope(Scope.owner()):  # the owner sets the tenants up
        public = await app.sources.create(title="Public", source_type="api")
        secret = await app.sources.create(title="Secret", source_type="api", version="9.1")
        shared_pub = await app.sources.create(title="Shared", source_type="api", version="1.0")
        shared_sec = await app.sources.create(title="Shared", source_type="api", version="2.0")
        handbook = (await app.documents.create_from_text(public.id, HANDBOOK, "Handbook", PUB_URL)).document
        salaries = (await app.documents.create_from_text(secret.id, SALARIES, "Salaries", SEC_URL)).document
        await app.profiles.create("pub", "public handbook", [public.id, shared_pub.id])
        await app.profiles.create("sec", "salaries", [secret.id, shared_sec.id])
        _, pub_secret = await app.tokens.create("pub-reader", ["pub"], rate_per_minute=rate)
        chunk = await app.db.pool.fetchval("SELECT id FROM chunks WHERE document_id = $1 LIMIT 1", salaries.id)
        return World(public.id, secret.id, handbook.id, salaries.id, chunk, pub_secret)


@asynccontextmanager
async def http_server(database_url: str, files_dir: Path, **env: str) -> AsyncIterator[str]:
    """`archivist serve --http --no-worker` on a free loopback port (in a thread: tests/support/served.py);
    yields the /mcp URL."""
    async with served_async({**server_env(database_url, files_dir), **env}, "--no-worker") as base:
        yield f"{base}/mcp"


def bearer_transport(url: str, secret: str | None) -> Any:
    """Streamable HTTP to `url`, with the bearer secret when given (none: the loopback owner)."""
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    return streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=60))


def bearer_client(url: str, secret: str | None) -> Client:
    return Client(bearer_transport(url, secret))


async def all_resources(client: Client) -> list[Any]:
    found, cursor = [], None
    for _ in range(100):
        page = await client.list_resources(cursor=cursor) if cursor else await client.list_resources()
        found += page.resources
        cursor = page.next_cursor
        if not cursor:
            break
    return found


async def rpc_error(call: Any) -> str:
    """The JSON-RPC error message of an awaitable that must fail."""
    try:
        await call
    except MCPError as exc:
        return exc.error.message
    raise AssertionError("the request succeeded")


def same_refusal(foreign: str, missing: str, foreign_key: str, missing_key: str) -> bool:
    """Whether two refusals are the same text once the looked-up key (id, url, name) is aligned."""
    return foreign.replace(foreign_key, "<key>") == missing.replace(missing_key, "<key>")


def random_id() -> str:
    return str(uuid4())


async def audit_rows(app: Any, who: str, expected: int, tool_prefix: str = "") -> list[Any]:
    """The server's audit rows for `who` (written off the request path: wait for them)."""
    rows: list[Any] = []
    for _ in range(60):
        rows = await app.db.pool.fetch(
            "SELECT tool, who, error_code, arguments FROM audit_log WHERE who = $1 AND tool LIKE $2 ORDER BY at",
            who,
            tool_prefix + "%",
        )
        if len(rows) >= expected:
            break
        await asyncio.sleep(0.1)
    return rows
