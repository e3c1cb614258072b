"""Issue 27 point 5: subscriptions are capped per session and per token, and one tenant's
subscriptions cannot delay another's notifications. A real `archivist serve --http` with two tenants'
tokens, driven by the SDK's own clients (`subscriptions/listen` on 2026-07-28, `resources/subscribe`
on a legacy session).

Before: one listen could watch any number of URIs (the same document under 10,000 `?offset=` spellings
passes the scope check), and one poll walked every watched URI in turn, so another tenant heard of its
own document's change only after the whole walk (0.1 s became 8 s and more)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client
from mcp.shared.exceptions import MCPError

from services.access.scope import Scope, use_scope
from tests.security.support import HANDBOOK, World, bearer_client, bearer_transport, build_world, http_server

PER_SESSION = 50
PER_TOKEN = 200


@pytest_asyncio.fixture(scope="module")
async def world(app: Any) -> World:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        return await build_world(app)


@pytest_asyncio.fixture(scope="module")
async def mallory(app: Any, world: World) -> str:
    _, secret = await app.tokens.create("mallory", ["sec"])
    return str(secret)


@pytest_asyncio.fixture(scope="module")
async def url(world: World, database_url: str, files_dir: Path) -> AsyncIterator[str]:
    env = {
        "ARCHIVIST_SUBSCRIPTIONS_PER_SESSION": str(PER_SESSION),
        "ARCHIVIST_SUBSCRIPTIONS_PER_TOKEN": str(PER_TOKEN),
    }
    async with http_server(database_url, files_dir, **env) as served:
        yield served


def spellings(document: Any, count: int, first: int = 0) -> list[str]:
    """One document under `count` distinct URIs (a read's ?offset is part of the URI, not of the resource)."""
    return [f"archivist://documents/{document}?offset={n}" for n in range(first, first + count)]


async def refusal(client: Client, uris: list[str]) -> MCPError:
    with pytest.raises(MCPError) as refused:
        async with client.listen(resource_subscriptions=uris):
            pass
    return refused.value


async def test_subscriptions_past_the_caps_are_refused(url: str, world: World, mallory: str) -> None:
    async with bearer_client(url, mallory) as client:
        over = await refusal(client, spellings(world.sec_document, PER_SESSION + 1))
        assert over.error.data["error_code"] == "RATE_LIMITED", over.error
        assert "ARCHIVIST_SUBSCRIPTIONS_PER_SESSION" in over.error.message, over.error.message
        async with AsyncExitStack() as held:
            for batch in range(PER_TOKEN // PER_SESSION):
                uris = spellings(world.sec_document, PER_SESSION, batch * PER_SESSION)
                sub = await held.enter_async_context(client.listen(resource_subscriptions=uris))
                assert len(sub.honored.resource_subscriptions or []) == PER_SESSION
            more = await refusal(client, spellings(world.sec_document, 1, PER_TOKEN))
            assert more.error.data["error_code"] == "RATE_LIMITED", more.error
            assert "ARCHIVIST_SUBSCRIPTIONS_PER_TOKEN" in more.error.message, more.error.message
        async with client.listen(resource_subscriptions=spellings(world.sec_document, 1)) as sub:
            assert sub.honored.resource_subscriptions  # closed streams gave their share back

    async with Client(bearer_transport(url, mallory), mode="legacy") as old:
        for uri in spellings(world.sec_document, PER_SESSION):
            await old.session.subscribe_resource(uri)
        with pytest.raises(MCPError) as legacy:
            await old.session.subscribe_resource(spellings(world.sec_document, 1, PER_SESSION)[0])
    assert legacy.value.error.data["error_code"] == "RATE_LIMITED"
    assert "ARCHIVIST_SUBSCRIPTIONS_PER_SESSION" in legacy.value.error.message


async def test_a_closed_session_gives_its_subscriptions_back(url: str, world: World, mallory: str) -> None:
    """More sessions, one after the other, than the token cap holds at once: each ending frees its share."""
    for round_ in range(PER_TOKEN // PER_SESSION + 1):
        async with Client(bearer_transport(url, mallory), mode="legacy") as old:
            for uri in spellings(world.sec_document, PER_SESSION, round_ * PER_SESSION):
                await old.session.subscribe_resource(uri)
        await asyncio.sleep(0.5)  # the server sees the session end


@pytest.mark.usefixtures("owner")  # the test changes the handbook itself, as the owner
async def test_a_crowded_tenant_cannot_delay_anothers_notifications(
    app: Any, url: str, world: World, mallory: str
) -> None:
    """mallory holds as many subscriptions as the server lets her (10,000 before: no cap) and never
    reads her streams; the handbook's reader still hears of its change within a few poll intervals."""
    async with AsyncExitStack() as held:
        attacker = await held.enter_async_context(bearer_client(url, mallory))
        taken = 0
        for batch in (500, PER_SESSION):  # as many per stream as she may, as many streams as she may
            while taken < 10_000:
                try:
                    uris = spellings(world.sec_document, batch, taken)
                    await held.enter_async_context(attacker.listen(resource_subscriptions=uris))
                except MCPError:
                    break
                taken += batch
        async with bearer_client(url, world.pub_secret) as reader:
            mine = f"archivist://documents/{world.pub_document}"
            async with reader.listen(resource_subscriptions=[mine]) as sub:
                await asyncio.sleep(1.5)  # a poll has taken the baseline
                for round_ in range(3):
                    await app.documents.update(world.pub_document, content=f"{HANDBOOK} Revision {round_}.")
                    started = time.monotonic()  # committed: the next poll sees it
                    async with asyncio.timeout(30):
                        event = await anext(aiter(sub))
                    waited = time.monotonic() - started
                    assert event.uri == mine
                    assert waited < 4.0, f"heard after {waited:.1f} s with mallory holding {taken} subscriptions"
