"""Open is a state someone chose, never a consequence (issue 38, weakness 1), against `archivist serve --http`
(served in a thread: tests/support/served.py) and the SDK's MCP client.

The server used to serve unauthenticated callers as the owner whenever it bound loopback and no active
token existed, asked on every request: behind a reverse proxy on 127.0.0.1 every request comes from
loopback, so the moment the only token expired or was revoked, anyone reaching the proxy was the owner.
Now the one predicate of services/access/open_state.py decides for every door (/mcp and what it serves,
the console, /healthz): open only on loopback, for a request no proxy relayed, with no ALLOWED_HOSTS,
sign-in or issuer setting, and only while no token ever existed here (sql/033) or by ARCHIVIST_SINGLE_USER.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.requests import Request

from access.guard import OPEN_MARK, caller_of
from services.access import identity
from services.access.open_state import OpenPolicy, relayed
from services.app import Archivist
from services.core.errors import PermissionDenied
from services.core.settings import Settings
from tests.access.test_access_dynamic import cli_here
from tests.access.test_access_http import HEADERS, INIT, authed
from tests.conftest import fresh_database, make_settings
from tests.e2e.test_e2e import server_env
from tests.support.mcp_helpers import ok
from tests.support.served import served_async

PROXY = "kb.example.com"
FORWARDED = ({"X-Forwarded-For": "203.0.113.9"}, {"Forwarded": "for=203.0.113.9"}, {"X-Forwarded-Host": PROXY})


def server(env: dict[str, str]) -> AbstractAsyncContextManager[str]:
    """`archivist serve --http --no-worker` (in a thread: tests/support/served.py); its base URL."""
    return served_async(env, "--no-worker")


@asynccontextmanager
async def knowledge_base(
    pg_server: Any, template: str, files_dir: Path, embedder: Any
) -> AsyncIterator[tuple[Archivist, str]]:
    """A fresh, migrated knowledge base that has never had a token (a copy of the session's migrated
    template, ~0.1 s instead of migrating again); yields it and its database URL."""
    async with fresh_database(pg_server, template=template) as url:
        app = await Archivist.open(make_settings(url, files_dir), embedder)
        try:
            yield app, url
        finally:
            await app.close()


async def post_init(base: str, secret: str | None = None, **headers: str) -> int:
    sent = {**HEADERS, **headers}
    if secret:
        sent["Authorization"] = f"Bearer {secret}"
    async with httpx.AsyncClient() as http:
        return (await http.post(f"{base}/mcp", json=INIT, headers=sent)).status_code


async def mcp_lists_sources(base: str, **headers: str) -> bool:
    """Whether the SDK's client, without a token, gets a source list (served as the owner)."""
    try:
        http = httpx2.AsyncClient(headers=headers)
        async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
            await ok(client, "manage_source", action="list")
            return True
    except Exception:
        return False


async def console_signs_in(base: str, **headers: str) -> bool:
    """Whether the console sends a browser without a session to the sign-in page."""
    async with httpx.AsyncClient() as http:
        page = await http.get(f"{base}/", headers=headers)
    return page.status_code == 303 and page.headers["location"].startswith("/signin")


async def health_details(base: str, **headers: str) -> bool:
    async with httpx.AsyncClient() as http:
        return set((await http.get(f"{base}/healthz", headers=headers)).json()) != {"ok"}


async def assert_closed(base: str) -> None:
    """Every door refuses a caller without a token, relayed or not."""
    for headers in ({}, *FORWARDED, {"Host": PROXY}):
        assert await post_init(base, **headers) in (400, 401), headers
    assert not await mcp_lists_sources(base)
    assert not await mcp_lists_sources(base, **{"X-Forwarded-For": "203.0.113.9"})
    assert await console_signs_in(base) and await console_signs_in(base, **{"X-Forwarded-For": "203.0.113.9"})
    assert not await health_details(base)


async def wait_until(moment: float) -> None:
    await asyncio.sleep(max(0.0, moment - time.time()) + 0.5)


async def test_behind_a_proxy_an_expired_token_does_not_open_the_server(
    pg_server: Any, migrated_template: str, files_dir: Path, embedder: Any
) -> None:
    """The set-up docs/operations.md recommends: loopback behind nginx, ALLOWED_HOSTS and sign-in set.
    The only token expires while the server runs: callers without one stay refused (401), not the owner."""
    async with knowledge_base(pg_server, migrated_template, files_dir, embedder) as (app, url):
        env = {
            **server_env(url, files_dir),
            "ARCHIVIST_ALLOWED_HOSTS": PROXY,
            "ARCHIVIST_CONSOLE_REQUIRE_SIGN_IN": "true",
        }
        async with server(env) as base:
            await assert_closed(base)  # a proxy's names are set: never open, not even before any token
            _, secret = await app.tokens.create("proxy-only", [], expires_in=timedelta(seconds=4))
            expires = time.time() + 4
            async with authed(f"{base}/mcp", secret) as client:
                await ok(client, "manage_source", action="list")
            assert await post_init(base, secret, **{"X-Forwarded-For": "203.0.113.9", "Host": PROXY}) == 200
            await wait_until(expires)
            assert not await app.tokens.any_active()
            assert await post_init(base, secret) == 401  # the expired token itself
            for headers in ({"X-Forwarded-For": "203.0.113.9"}, {"Host": PROXY}, {"Host": f"{PROXY}:443"}):
                assert await post_init(base, **headers) == 401, headers
            await assert_closed(base)


def test_revoking_or_expiring_the_last_token_never_reopens_loopback(
    pg_server: Any, migrated_template: str, files_dir: Path, embedder: Any
) -> None:
    """A plain loopback server (nginx's default proxy_pass adds no forwarding header): open while no token
    ever existed, closed for good by the first one, whatever happens to it; the CLI says which.
    Sync, on its own asyncio.Runner idle between steps, so the commands run in this process (`cli_here`)."""
    with asyncio.Runner() as loop:
        stack = contextlib.AsyncExitStack()
        try:
            app, url = loop.run(
                stack.enter_async_context(knowledge_base(pg_server, migrated_template, files_dir, embedder))
            )
            env = server_env(url, files_dir)
            base = loop.run(stack.enter_async_context(server(env)))
            loop.run(open_until_the_first_token(app, base))
            loop.run(app.tokens.create("long", []))
            revoked = cli_here(env, "token", "revoke", "long")
            assert "closed: no token is active" in revoked and "never reopen" in revoked, revoked
            loop.run(assert_closed(base))
            doctor = json.loads(cli_here(env, "doctor", "--json"))
            assert doctor["http_access"]["open"] is False and "no token is active" in doctor["http_access"]["state"]
        finally:
            loop.run(stack.aclose())


async def open_until_the_first_token(app: Archivist, base: str) -> None:
    # a fresh install, no token ever: open on loopback, for local callers only
    assert await mcp_lists_sources(base)
    assert await post_init(base) == 200 and await post_init(base, Host="localhost") == 200
    assert not await console_signs_in(base) and await health_details(base)
    for headers in FORWARDED:  # relayed by a proxy: never the owner
        assert await post_init(base, **headers) == 401, headers
        assert await console_signs_in(base, **headers)
    assert not await mcp_lists_sources(base, **{"X-Forwarded-For": "203.0.113.9"})

    _, short = await app.tokens.create("short", [], expires_in=timedelta(seconds=4))
    expires = time.time() + 4
    assert await post_init(base) == 401 and await post_init(base, short) == 200
    await wait_until(expires)
    assert not await app.tokens.any_active()
    await assert_closed(base)  # the only token expired: still closed


async def test_single_user_is_open_on_purpose_and_only_on_loopback(
    pg_server: Any, migrated_template: str, files_dir: Path, embedder: Any
) -> None:
    """ARCHIVIST_SINGLE_USER: the operator's choice opens loopback even after tokens, but never a relayed
    request, a public name, or a server with ALLOWED_HOSTS."""
    async with knowledge_base(pg_server, migrated_template, files_dir, embedder) as (app, url):
        await app.tokens.create("gone", [])
        await app.tokens.revoke("gone")
        env = {**server_env(url, files_dir), "ARCHIVIST_SINGLE_USER": "true"}
        async with server(env) as base:
            assert await mcp_lists_sources(base) and await post_init(base) == 200
            assert not await console_signs_in(base)
            for headers in FORWARDED:
                assert await post_init(base, **headers) == 401, headers
        async with server({**env, "ARCHIVIST_ALLOWED_HOSTS": PROXY}) as base:
            await assert_closed(base)


@pytest.mark.parametrize(
    ("names", "relayed_"),
    [
        (["host", "accept"], False),
        (["Forwarded"], True),
        (["X-Forwarded-For"], True),
        (["x-forwarded-proto"], True),
        (["X-Real-IP"], True),
        (["via"], True),
    ],
)
def test_a_relayed_request_is_recognised(names: list[str], relayed_: bool) -> None:
    assert relayed(names) is relayed_


@pytest.mark.parametrize(
    ("overrides", "bind", "closed"),
    [
        ({}, "127.0.0.1", False),
        ({}, "0.0.0.0", True),
        ({"allowed_hosts": [PROXY]}, "127.0.0.1", True),
        ({"console_require_sign_in": True}, "127.0.0.1", True),
        ({"oauth_issuer": "https://id.example"}, "127.0.0.1", True),
        ({"single_user": True, "allowed_hosts": [PROXY]}, "127.0.0.1", True),
    ],
)
def test_settings_that_say_others_reach_the_server_close_it(overrides: dict[str, Any], bind: str, closed: bool) -> None:
    policy = OpenPolicy.for_server(Settings(_env_file=None, **overrides), bind)
    assert (policy.closed_by is not None) is closed
    assert policy.refuses("127.0.0.1:8765", ["host"]) is closed
    assert policy.refuses(f"{PROXY}:443", ["host"]) is True


async def test_an_http_request_the_gate_did_not_admit_is_nobody(app: Archivist) -> None:
    """Behind the /mcp gate the access gate fails closed: an HTTP request with no verified token is the
    owner only when the gate marked it open; any other (a route that skipped the gate) is refused."""
    request = Request({"type": "http", "method": "POST", "path": "/mcp", "headers": [(b"host", b"127.0.0.1")]})
    with pytest.raises(PermissionDenied):
        await identity.scope_of(app, caller_of([], request))
    request.scope[OPEN_MARK] = True
    assert (await identity.scope_of(app, caller_of([], request))).local_owner
