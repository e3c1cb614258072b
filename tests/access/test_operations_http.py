"""Issue 32 points 5 and 6 against `archivist serve --http` (in a thread) and the SDK's client as scoped tenants:
X-RateLimit-* headers on /mcp replies and the burst setting; failed calls' error messages in the audit
log (redacted, cut) and `archivist audit --stats`; the `search_and_answer` prompt, gated like every
request (scope, rate bucket, audit)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest
import pytest_asyncio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from services.access.audit import ERROR_MESSAGE_LIMIT
from services.access.scope import Scope, use_scope
from tests.e2e.test_e2e import run_cli, server_env
from tests.support.mcp_helpers import call, client_in_own_task, err, ok
from tests.support.served import served_async

BURST = 3
QUERY = "when do the ferries leave"


@pytest_asyncio.fixture(scope="module")
async def world(app: Any) -> dict[str, Any]:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        ids: dict[str, Any] = {}
        for key in ("A", "B"):
            source = await app.sources.create(title=f"Ops {key}", source_type="api")
            await app.documents.create_from_text(
                source.id, f"Ferries leave the {key} quay at dawn.", title=f"Ferry {key}"
            )
            ids[key] = source.id
        await app.profiles.create("ops-a", "Ops A only", [ids["A"]])
        # one call a minute, BURST at once: the headers count down without refilling during the test
        _, ids["slow"] = await app.tokens.create("ops-slow", ["ops-a"], rate_per_minute=1)
        _, ids["tenant"] = await app.tokens.create("ops-tenant", ["ops-a"], rate_per_minute=60_000)
        return ids


@pytest_asyncio.fixture(scope="module")
async def server_url(world: dict[str, Any], database_url: str, files_dir: Path) -> AsyncIterator[str]:
    env = {**server_env(database_url, files_dir), "ARCHIVIST_RATE_BURST": str(BURST)}
    async with served_async(env, "--no-worker") as base:  # in a thread (tests/support/served.py)
        yield f"{base}/mcp"


class Recorder:
    """The X-RateLimit-* headers of each JSON-RPC request's HTTP reply, by method."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str]]] = []

    async def hook(self, response: Any) -> None:
        try:
            method = json.loads(response.request.content or b"{}").get("method", "")
        except ValueError:
            method = ""
        headers = {k.lower(): v for k, v in response.headers.items() if k.lower().startswith("x-ratelimit-")}
        self.seen.append((method, headers))

    def of(self, method: str) -> list[dict[str, str]]:
        return [h for m, h in self.seen if m == method]


@pytest_asyncio.fixture
async def connect(server_url: str) -> AsyncIterator[Any]:
    """connect(secret) -> (client, recorder): the SDK's client over HTTP with a bearer token."""
    async with AsyncExitStack() as stack:

        async def open_client(secret: str) -> tuple[Client, Recorder]:
            recorder = Recorder()
            http = httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {secret}"}, event_hooks={"response": [recorder.hook]}, timeout=30
            )
            transport = streamable_http_client(server_url, http_client=http)
            return await stack.enter_async_context(client_in_own_task(transport)), recorder

        yield open_client


async def test_rate_limit_headers_count_down_to_the_burst(connect: Any, world: dict[str, Any]) -> None:
    """A token of 1 call/min with ARCHIVIST_RATE_BURST=3: three calls at once, then RATE_LIMITED; every
    /mcp reply tells the bucket after its own call was taken."""
    client, recorder = await connect(world["slow"])
    started = time.time()
    for _ in range(BURST):
        await ok(client, "manage_source", action="list")
    refused = await err(client, "manage_source", "RATE_LIMITED", action="list")
    assert refused["retryable"] is True and refused["error_detail"]["code"] == "RATE_LIMITED"
    calls = recorder.of("tools/call")
    assert [h["x-ratelimit-remaining"] for h in calls] == ["2", "1", "0", "0"]
    assert {h["x-ratelimit-limit"] for h in calls} == {"1"}
    reset = int(calls[-1]["x-ratelimit-reset"])  # the bucket is full again ~3 minutes on (1 call a minute)
    assert started + 150 < reset < time.time() + 181
    # tools/list (read after the first call) is not gated: it took nothing
    assert [h["x-ratelimit-remaining"] for h in recorder.of("tools/list")] == ["2", "2"]


async def test_prompt_is_gated_and_scoped(connect: Any, world: dict[str, Any], app: Any) -> None:
    tenant, recorder = await connect(world["tenant"])
    listed = await tenant.list_prompts()
    prompt = next(p for p in listed.prompts if p.name == "search_and_answer")
    assert {(a.name, a.required) for a in prompt.arguments} == {("question", True), ("source", False)}

    got = await tenant.get_prompt("search_and_answer", {"question": QUERY, "source": "Ops A"})
    text = got.messages[0].content.text
    assert got.messages[0].role == "user" and QUERY in text
    assert f'source_id="{world["A"]}"' in text and "search_knowledge_base" in text and "cite" in text
    plain = await tenant.get_prompt("search_and_answer", {"question": QUERY})
    assert "source_id" not in plain.messages[0].content.text
    assert recorder.of("prompts/get")[-1]["x-ratelimit-limit"] == "60000"  # it took a call from the bucket

    # a source outside the tenant's profile reads exactly like one that does not exist
    refusals = []
    for name in ("Ops B", "Ops Z"):
        with pytest.raises(MCPError) as refused:
            await tenant.get_prompt("search_and_answer", {"question": QUERY, "source": name})
        refusals.append(refused.value.error.message.replace(name, "NAME"))
        assert refused.value.error.data["error_code"] == "NOT_FOUND"
    assert refusals[0] == refusals[1]
    with pytest.raises(MCPError):
        await tenant.get_prompt("search_and_answer", {"question": "   "})

    rows = await audit_rows(app, "ops-tenant", "prompts/get", 5)
    assert [r["error_code"] for r in rows] == [None, None, "NOT_FOUND", "NOT_FOUND", "INVALID_ARGUMENT"]
    assert all(r["profiles"] == ["ops-a"] for r in rows)
    assert "Ops Z" in rows[3]["error_message"] and "question must be" in rows[4]["error_message"]


async def test_audit_keeps_error_messages_and_stats(
    connect: Any, world: dict[str, Any], app: Any, database_url: str, files_dir: Path
) -> None:
    tenant, _ = await connect(world["tenant"])
    for _ in range(3):
        await ok(tenant, "search_knowledge_base", query=QUERY)
    await ok(tenant, "search_knowledge_base", query="quay")
    payload = await call(tenant, "manage_source", action="get", source_id=str(world["B"]))
    assert payload["error_code"] == "NOT_FOUND"
    secret = "arch_" + "s3cret" * 4
    await err(tenant, "manage_source", "INVALID_ARGUMENT", action="get", source_id=secret)

    rows = await audit_rows(app, "ops-tenant", "manage_source", 2)
    assert rows[0]["error_message"] == payload["error"]  # the reply's message, kept
    assert secret not in rows[1]["error_message"] and "[redacted]" in rows[1]["error_message"]

    env = server_env(database_url, files_dir)
    done = run_cli(["audit", "--stats", "--since", "1h", "--token", "ops-tenant", "--json"], env)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    search = next(g for g in stats["by_profile_tool"] if g["tool"] == "search_knowledge_base")
    assert search["profile"] == "ops-a" and search["calls"] == 4 and search["errors"] == 0
    assert 0 < search["p50_ms"] <= search["p95_ms"]
    assert stats["top_queries"][:2] == [{"query": QUERY, "calls": 3}, {"query": "quay", "calls": 1}]
    assert stats["total"]["errors"] >= 2
    text = run_cli(["audit", "--stats", "--since", "1h"], env).stdout
    assert "p95 ms" in text and "ops-a" in text and QUERY in text


async def test_audit_redacts_and_cuts_error_messages(app: Any) -> None:
    """The audit's own redaction (services/access/redaction.py), whatever the caller passes it."""
    long = "password=hunter2 " + "x" * 2000
    app.audit.record("manage_source", "get", "redaction-test", [], {}, "INVALID_ARGUMENT", 1.0, 10, long)
    app.audit.record("manage_source", "get", "redaction-test", [], {}, None, 1.0, 10, "no error, no message")
    await app.audit.flush()
    page = await app.audit.query(timedelta(hours=1), token="redaction-test")
    by_code = {e.error_code: e.error_message for e in page.items}
    assert "hunter2" not in by_code["INVALID_ARGUMENT"] and "[redacted]" in by_code["INVALID_ARGUMENT"]
    assert len(by_code["INVALID_ARGUMENT"]) == ERROR_MESSAGE_LIMIT and by_code["INVALID_ARGUMENT"].endswith("…")
    assert by_code[None] is None


async def audit_rows(app: Any, who: str, tool: str, count: int) -> list[Any]:
    """The caller's last `count` audit rows of `tool`, oldest first (the server writes them off the request path)."""
    for _ in range(100):
        rows = await app.db.pool.fetch(
            "SELECT error_code, error_message, profiles FROM audit_log WHERE who = $1 AND tool = $2 ORDER BY id",
            who,
            tool,
        )
        if len(rows) >= count:
            return list(rows[-count:])
        await asyncio.sleep(0.1)
    raise AssertionError(f"{len(rows)} audit rows of {tool} for {who}, expected {count}")
