"""Issue 21 point 7 through the SDK's own client, in `legacy` and `2026-07-28` modes: answer=true three
ways, scoped resource subscriptions (resources/subscribe and subscriptions/listen), crawl jobs as
`io.modelcontextprotocol/tasks` tasks, and cache hints on list results."""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import httpx2
import pytest
import pytest_asyncio
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CallToolResult,
    CancelTaskRequest,
    CancelTaskRequestParams,
    CreateMessageRequestParams,
    CreateMessageResult,
    GetTaskRequest,
    GetTaskRequestParams,
    InputRequiredResult,
    Result,
    TextContent,
)
from pydantic import ConfigDict, TypeAdapter

from models.jobs import CrawlRequest
from server import build_server
from services.access.scope import Scope, use_scope
from services.app import Runtime
from services.core.settings import Settings
from tests.access.test_access_stateless import RoundRobin
from tests.conftest import make_settings
from tests.e2e.test_e2e import ARCHIVIST, free_port, server_env, wait_for_port
from tests.support.fixture_site import FixtureSite
from tests.support.mcp_helpers import client_in_own_task, ok
from tests.support.served import served_async

MODERN = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
SAFFRON = "Saffron is the dried stigma of the crocus flower, picked by hand at dawn."


@pytest.fixture(scope="module")
def proto_settings(database_url: str, files_dir: Path) -> Settings:
    return make_settings(database_url, files_dir, crawl_delay_seconds=0, crawl_page_timeout=2.0, job_poll_seconds=0.1)


def server(settings: Settings, embedder: Any, **options: Any) -> Any:
    built = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False, **options)
    if getattr(built, "change_watch", None) is not None:  # (absent before subscriptions existed)
        built.change_watch.interval = 0.1
    return built


@pytest_asyncio.fixture(scope="module")
async def world(app: Any) -> dict[str, Any]:
    """Two sources, one document each, and a profile that holds only the first."""
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        ids: dict[str, Any] = {}
        for key in ("a", "b"):
            source = await app.sources.create(title=f"Protocol {key}", source_type="api")
            created = await app.documents.create_from_text(source.id, f"{SAFFRON} ({key})", title=f"Saffron {key}")
            ids[key], ids[f"doc_{key}"] = source.id, created.document.id
        await app.profiles.create("proto_a", "Protocol a only", [ids["a"]])
        return ids


def doc_uri(doc_id: Any) -> str:
    return f"archivist://documents/{doc_id}"


# --- 1. answer=true: input request (2026-07-28), sampling (legacy), passages only (no sampling) ---------


async def canned(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
    assert "[1]" in params.messages[0].content.text
    return CreateMessageResult(role="assistant", content=TextContent(type="text", text="Crocus stigma [1]."), model="m")


async def test_answer_three_ways(world: dict[str, Any], proto_settings: Settings, embedder: Any) -> None:
    args = {"query": "what is saffron", "source_id": str(world["a"]), "answer": True}
    async with client_in_own_task(server(proto_settings, embedder), sampling_callback=canned, mode=MODERN) as modern:
        first = await modern.session.call_tool("search_knowledge_base", args, allow_input_required=True)
        assert isinstance(first, InputRequiredResult)  # the question rides the result, not a server request
        assert first.input_requests["answer"].method == "sampling/createMessage" and first.request_state
        answered = await ok(modern, "search_knowledge_base", **args)  # the client's driver answers and retries
    assert answered["answer"] == "Crocus stigma [1]." and answered["citations"][0]["n"] == 1

    asked: list[Any] = []

    async def sampler(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        asked.append(params)
        return await canned(context, params)

    async with client_in_own_task(server(proto_settings, embedder), sampling_callback=sampler, mode="legacy") as old:
        first = await old.session.call_tool("search_knowledge_base", args, allow_input_required=True)
        assert isinstance(first, CallToolResult) and len(asked) == 1  # sampling/createMessage during the call
        legacy = json.loads(first.content[0].text)
    assert legacy["answer"] == "Crocus stigma [1]." and legacy["citations"] == answered["citations"]

    for mode in (MODERN, "legacy"):
        async with client_in_own_task(server(proto_settings, embedder), mode=mode) as plain:
            fallback = await ok(plain, "search_knowledge_base", **args)
        assert fallback["answer"] is None and "answer from the passages" in fallback["note"] and fallback["passages"]


async def test_answer_across_stateless_replicas(
    world: dict[str, Any], app: Any, database_url: str, files_dir: Path
) -> None:
    """Round one lands on one replica and the retry on the other: both open the sealed requestState
    because they share ARCHIVIST_REQUEST_STATE_KEY (each process had its own key before)."""
    env = {**server_env(database_url, files_dir), "ARCHIVIST_REQUEST_STATE_KEY": secrets.token_hex(32)}
    ports = [free_port(), free_port()]
    command = [ARCHIVIST, "serve", "--http", "--stateless", "--no-worker", "--port"]
    procs = [subprocess.Popen([*command, str(p)], env=env, stdout=subprocess.DEVNULL) for p in ports]
    _, secret = await app.tokens.create("replicas", [])  # (a token also makes the readiness probe's GET answer 401)
    try:
        for port, proc in zip(ports, procs, strict=True):
            await wait_for_port(port, proc, 90)
        balancer = RoundRobin(ports)
        transport = streamable_http_client(
            f"http://127.0.0.1:{ports[0]}/mcp",
            http_client=httpx2.AsyncClient(transport=balancer, headers={"Authorization": f"Bearer {secret}"}),
        )
        async with Client(transport, sampling_callback=canned) as c:
            assert c.protocol_version == MODERN
            args = {"query": "what is saffron", "source_id": str(world["a"]), "answer": True}
            answered = await ok(c, "search_knowledge_base", **args)
        assert answered["answer"] == "Crocus stigma [1]." and min(balancer.hits[p] for p in ports) >= 2
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


# --- 2. subscriptions, scoped ----------------------------------------------------------------------------


class Heard:
    """Collects notifications/resources/updated URIs from a legacy session's message handler."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.changed = asyncio.Event()

    async def __call__(self, message: Any) -> None:
        if getattr(message, "method", None) == "notifications/resources/updated":
            self.uris.append(str(message.params.uri))
            self.changed.set()


async def until(check: Callable[[], bool], seconds: float = 10.0) -> None:
    async with asyncio.timeout(seconds):
        while not check():
            await asyncio.sleep(0.05)


@pytest.mark.usefixtures("owner")
async def test_legacy_subscriptions_stay_in_scope(
    world: dict[str, Any], app: Any, proto_settings: Settings, embedder: Any
) -> None:
    heard = Heard()
    confined = server(proto_settings, embedder, profiles=["proto_a"])
    mine, theirs = doc_uri(world["doc_a"]), doc_uri(world["doc_b"])
    async with client_in_own_task(confined, mode="legacy", message_handler=heard) as c:
        assert c.server_capabilities.resources.subscribe is True
        await c.session.subscribe_resource(mine)
        await c.session.subscribe_resource(f"archivist://sources/{world['a']}")
        with pytest.raises(MCPError):  # another profile's document: not found, not subscribed
            await c.session.subscribe_resource(theirs)
        await app.documents.update(world["doc_b"], content=f"{SAFFRON} Changed (b).")
        await app.documents.update(world["doc_a"], content=f"{SAFFRON} Changed (a).")
        await until(lambda: mine in heard.uris)
        await app.documents.create_from_text(world["a"], "Crocus fields bloom in autumn.", title="Crocus a")
        await until(lambda: f"archivist://sources/{world['a']}" in heard.uris)
        await asyncio.sleep(0.5)
    assert theirs not in heard.uris and all(str(world["b"]) not in u for u in heard.uris)


@pytest.mark.usefixtures("owner")
async def test_listen_stays_in_scope(world: dict[str, Any], app: Any, proto_settings: Settings, embedder: Any) -> None:
    confined = server(proto_settings, embedder, profiles=["proto_a"])
    mine, theirs = doc_uri(world["doc_a"]), doc_uri(world["doc_b"])
    async with client_in_own_task(server(proto_settings, embedder)) as probe:  # auto: discovers 2026-07-28
        assert probe.protocol_version == MODERN and probe.server_capabilities.resources.subscribe is True
        assert TASKS in (probe.server_capabilities.extensions or {})
    async with client_in_own_task(confined, mode=MODERN) as c:
        async with c.listen(resource_subscriptions=[mine, theirs]) as sub:
            assert sub.honored.resource_subscriptions == [mine]  # the other profile's URI is not acknowledged
            await app.documents.update(world["doc_b"], content=f"{SAFFRON} Again (b).")
            await app.documents.update(world["doc_a"], content=f"{SAFFRON} Again (a).")
            events = aiter(sub)
            async with asyncio.timeout(10):
                event = await anext(events)
            assert event.uri == mine


@pytest.mark.usefixtures("owner")  # the test changes the documents itself, as the owner
async def test_listen_over_http_with_a_profile_token(
    world: dict[str, Any], app: Any, database_url: str, files_dir: Path
) -> None:
    """The same over a real server: streamable HTTP, a token confined to one profile."""
    _, secret = await app.tokens.create("listener", ["proto_a"])
    mine, theirs = doc_uri(world["doc_a"]), doc_uri(world["doc_b"])
    async with served_async(server_env(database_url, files_dir), "--no-worker") as base:  # in a thread
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=60)
        async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as c:
            assert c.protocol_version == MODERN
            async with c.listen(resource_subscriptions=[mine, theirs]) as sub:
                assert sub.honored.resource_subscriptions == [mine]
                await app.documents.update(world["doc_b"], content=f"{SAFFRON} Over HTTP (b).")
                await app.documents.update(world["doc_a"], content=f"{SAFFRON} Over HTTP (a).")
                events = aiter(sub)
                async with asyncio.timeout(20):
                    assert (await anext(events)).uri == mine


# --- 3. crawl jobs as tasks, and job progress as a subscription ---------------------------------------


class CreatedTask(Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"]
    task_id: str
    status: str


async def task_get(c: Client, task_id: str) -> dict[str, Any]:
    request = GetTaskRequest(params=GetTaskRequestParams(task_id=task_id))
    return await c.session.send_request(request, TypeAdapter(dict[str, Any]))


async def poll_task(c: Client, task_id: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    async with asyncio.timeout(60):
        while not done(task := await task_get(c, task_id)):
            await asyncio.sleep(0.2)
    return task


class TasksClient(ClientExtension):
    """A minimal client side of the tasks extension (the SDK has none): poll tasks/get to the end."""

    identifier = TASKS

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self.resolve)]

    async def resolve(self, created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
        self.created = created
        while True:
            task = await ctx.session.send_request(
                GetTaskRequest(params=GetTaskRequestParams(task_id=created.task_id)), TypeAdapter(dict[str, Any])
            )
            if task["status"] == "completed":
                return CallToolResult.model_validate(task["result"])
            assert task["status"] == "working", task
            await asyncio.sleep(0.2)


@pytest.fixture
def site() -> Any:
    with FixtureSite() as running:
        yield running


async def test_crawl_as_task(proto_settings: Settings, embedder: Any, site: FixtureSite) -> None:
    start = {"action": "start", "url": site.url_for("/"), "recursive": True, "max_depth": 1, "max_pages": 3}
    tasks = TasksClient()
    worker = build_server(proto_settings, runtime=Runtime(proto_settings, embedder=embedder), run_worker=True)
    async with client_in_own_task(worker, mode=MODERN, extensions=[tasks]) as c:
        created = await c.session.call_tool("crawl_website", start, allow_claimed=True)
        assert isinstance(created, CreatedTask) and created.status == "working"
        first = await task_get(c, created.task_id)
        assert first["status"] in ("working", "completed") and first["pollIntervalMs"] > 0 and "ttlMs" in first
        done = await poll_task(c, created.task_id, lambda t: t["status"] != "working")
        body = json.loads(done["result"]["content"][0]["text"])
        assert done["status"] == "completed" and body["crawl_job"]["id"] == created.task_id
        assert body["crawl_job"]["status"] == "completed" and body["crawl_job"]["pages_crawled"] >= 1

        final = await c.call_tool(
            "crawl_website", {**start, "action": "recrawl", "url": None, "job_id": created.task_id}
        )
        job = json.loads(final.content[0].text)["crawl_job"]  # resolved transparently by the extension
        assert job["status"] == "completed" and job["id"] == tasks.created.task_id

        slow = {**start, "url": site.url_for("/slow"), "recursive": False, "max_pages": 1}
        site.set_delay("/slow", 3.0)
        to_cancel = await c.session.call_tool("crawl_website", slow, allow_claimed=True)
        assert isinstance(to_cancel, CreatedTask)
        ack = await c.session.send_request(
            CancelTaskRequest(params=CancelTaskRequestParams(task_id=to_cancel.task_id)), TypeAdapter(dict[str, Any])
        )
        assert ack.get("resultType", "complete") == "complete"
        cancelled = await poll_task(c, to_cancel.task_id, lambda t: t["status"] != "working")
        assert cancelled["status"] == "cancelled" and "result" not in cancelled
        with pytest.raises(MCPError) as missing:
            await task_get(c, "00000000-0000-4000-8000-000000000000")
        assert missing.value.error.code == -32602

    async with client_in_own_task(server(proto_settings, embedder), mode=MODERN) as undeclared:
        plain = await ok(undeclared, "crawl_website", action="status", job_id=created.task_id)
        assert plain["crawl_job"]["status"] == "completed"  # polling stays for everyone
        with pytest.raises(MCPError) as refused:
            await task_get(undeclared, created.task_id)
        assert refused.value.error.code == -32021
    async with client_in_own_task(server(proto_settings, embedder), mode="legacy") as old:
        with pytest.raises(MCPError):  # no tasks/* before 2026-07-28
            await task_get(old, created.task_id)


@pytest.mark.usefixtures("owner")
async def test_task_and_job_resource_stay_in_scope(
    world: dict[str, Any], app: Any, proto_settings: Settings, embedder: Any, site: FixtureSite
) -> None:
    theirs = await app.crawl.start(
        CrawlRequest(
            url=site.url_for("/"),
            source_id=str(world["b"]),
            title=None,
            recursive=False,
            max_depth=1,
            max_pages=1,
            include_patterns=None,
            exclude_patterns=None,
            scope="same-host",
        )
    )
    confined = server(proto_settings, embedder, profiles=["proto_a"])
    async with client_in_own_task(confined, mode=MODERN, extensions=[TasksClient()]) as c:
        with pytest.raises(MCPError) as hidden:
            await task_get(c, str(theirs.job.id))
        assert hidden.value.error.code == -32602
        with pytest.raises(MCPError):
            await c.read_resource(f"archivist://jobs/{theirs.job.id}")
        async with c.listen(resource_subscriptions=[f"archivist://jobs/{theirs.job.id}"]) as sub:
            assert not sub.honored.resource_subscriptions


async def test_job_progress_is_notified(proto_settings: Settings, embedder: Any, site: FixtureSite) -> None:
    heard = Heard()
    worker = build_server(proto_settings, runtime=Runtime(proto_settings, embedder=embedder), run_worker=True)
    if getattr(worker, "change_watch", None) is not None:
        worker.change_watch.interval = 0.1
    site.set_delay("/slow", 1.0)
    async with client_in_own_task(worker, mode="legacy", message_handler=heard) as c:
        started = await ok(c, "crawl_website", action="start", url=site.url_for("/slow"), max_pages=1)
        uri = f"archivist://jobs/{started['crawl_job']['id']}"
        await c.session.subscribe_resource(uri)
        await until(lambda: uri in heard.uris, 30)
        read = await c.read_resource(uri)
        assert json.loads(read.contents[0].text)["crawl_job"]["id"] == started["crawl_job"]["id"]


# --- 4. cache hints ------------------------------------------------------------------------------------


async def test_cache_hints_on_lists(proto_settings: Settings, embedder: Any) -> None:
    async with client_in_own_task(server(proto_settings, embedder), mode=MODERN) as c:
        tools = await c.session.list_tools()
        assert (tools.ttl_ms, tools.cache_scope) == (60_000, "private")  # names the caller's profiles
        templates = await c.session.list_resource_templates()
        assert (templates.ttl_ms, templates.cache_scope) == (3_600_000, "public")
        listed = await c.session.list_resources()
        assert (listed.ttl_ms, listed.cache_scope) == (0, "private")
    async with client_in_own_task(server(proto_settings, embedder), mode="legacy") as old:
        assert (await old.session.list_tools()).ttl_ms != 60_000  # not part of the older protocol
