"""Issue 27 point 5: the edges of identity fail closed. A real `archivist serve --http` trusts a real
OpenID provider on 127.0.0.1 (tests/security/oidc_idp.py); each test is an attack that got through
before its fix:

- an email counts for `--email-domain` grants (and names the caller) only with `email_verified: true`;
- an introspection answer must name this resource in `aud`;
- the audit name and the rate bucket never come from a display name (`preferred_username`);
- after sign-in, `next` stays on this site (Debian's Chromium follows it);
- no number of anonymous sign-in starts pushes out another browser's sign-in in progress.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import pytest_asyncio

from services.access.scope import Scope, use_scope
from tests.security.oidc_idp import Client as IdpClient
from tests.security.oidc_idp import IdP, running
from tests.security.support import World, audit_rows, bearer_client, build_world, http_server
from tests.security.test_oauth import post_initialize
from tests.support.fixture_site import FixtureSite
from tests.support.mcp_helpers import call
from tests.support.web_helpers import chromium
from web.auth import safe_next

RATE = 40  # ARCHIVIST_RATE_PER_MINUTE of this module's server
USERS = {
    "carol": {"email": "carol@partner.org", "email_verified": True},  # the partner.org grant
    "eve": {"email": "eve@partner.org"},  # no email_verified
    "trudy": {"email": "trudy@partner.org", "email_verified": "false"},  # a string, not a boolean
    "tess": {"email": "tess@partner.org", "email_verified": "true"},  # a string too
    "u-101": {"preferred_username": "alice", "groups": ["eng"]},  # alice, without an email claim
    "u-666": {"preferred_username": "alice", "groups": ["eng"]},  # mallory, who calls herself alice
    "nina": {"email": "nina@example.com", "email_verified": True, "groups": ["eng"]},  # the browser
}


@pytest.fixture(scope="module")
def idp() -> Iterator[IdP]:
    provider = IdP(USERS)
    provider.clients["archivist"] = IdpClient("archivist", "rs-secret")  # introspection and the console
    provider.clients["opaque-agent"] = IdpClient("opaque-agent", "s2", claims={"groups": ["eng"]}, opaque=True)
    with running(provider):
        yield provider


@pytest_asyncio.fixture(scope="module")
async def world(app: Any) -> World:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        built = await build_world(app)
        await app.grants.grant("pub", "group", "eng")
        await app.grants.grant("pub", "email_domain", "partner.org")
        return built


@pytest_asyncio.fixture(scope="module")
async def url(idp: IdP, world: World, database_url: str, files_dir: Path) -> AsyncIterator[str]:
    env = {
        "ARCHIVIST_OAUTH_ISSUER": idp.issuer,
        "ARCHIVIST_OAUTH_REQUIRED_SCOPES": "archivist",
        "ARCHIVIST_OAUTH_CLIENT_ID": "archivist",
        "ARCHIVIST_OAUTH_CLIENT_SECRET": "rs-secret",
        "ARCHIVIST_RATE_PER_MINUTE": str(RATE),
    }
    async with http_server(database_url, files_dir, **env) as served:
        idp.clients["archivist"].redirect_uris.append(served.removesuffix("/mcp") + "/signin/oidc/callback")
        yield served


async def list_sources(url: str, token: str) -> dict[str, Any]:
    async with bearer_client(url, token) as client:
        return await call(client, "manage_source", action="list")


async def test_only_a_boolean_email_verified_matches_a_domain_grant(idp: IdP, url: str, world: World) -> None:
    """`--email-domain partner.org` reached eve (no `email_verified`), trudy (`"false"`) and tess
    (`"true"`): only carol's boolean `true` counts."""
    carol = await list_sources(url, idp.mint("carol", url, "archivist"))
    assert carol["success"] and {s["title"] for s in carol["sources"]} == {"Public", "Shared"}, carol
    for user in ("eve", "trudy", "tess"):
        reply = await list_sources(url, idp.mint(user, url, "archivist"))
        assert reply["error_code"] == "PERMISSION_DENIED", (user, reply)
        assert "not verified" in reply["error"], reply  # the refusal says why


async def test_an_introspection_answer_must_name_this_resource(idp: IdP, url: str, world: World) -> None:
    """An opaque token whose introspection answer has no `aud` (a token for any API of the issuer) got in."""
    claims = idp.claims_for(idp.clients["opaque-agent"], None, "archivist", url)
    other_api = "http://127.0.0.1:1/other-api"
    answers = {
        "no aud": {k: v for k, v in claims.items() if k != "aud"},
        "another API": {**claims, "aud": other_api},
        "a string that only contains it": {**claims, "aud": f"{other_api} {url}"},
        "this resource, as a string": {**claims, "aud": url},
        "this resource, in a list": {**claims, "aud": [other_api, url]},
    }
    statuses = {}
    for why, answer in answers.items():
        token = secrets.token_urlsafe(32)
        idp.opaque[token] = answer
        statuses[why] = (await post_initialize(url, token)).status_code
    assert statuses == {
        "no aud": 401,
        "another API": 401,
        "a string that only contains it": 401,
        "this resource, as a string": 200,
        "this resource, in a list": 200,
    }


async def test_a_display_name_names_no_one(app: Any, idp: IdP, url: str, world: World) -> None:
    """mallory (subject u-666) calls herself `alice`: she used to be logged as `oidc:alice` and to
    share alice's rate bucket, so her calls throttled alice (subject u-101)."""
    replies: list[dict[str, Any]] = []
    async with bearer_client(url, idp.mint("u-666", url, "archivist")) as mallory:
        while len(replies) < 3 * RATE and (not replies or replies[-1]["success"]):  # her bucket refills as she goes
            replies.append(await call(mallory, "manage_source", action="list"))
    assert replies[-1]["error_code"] == "RATE_LIMITED", replies[-1]
    alice = await list_sources(url, idp.mint("u-101", url, "archivist"))
    assert alice["success"], alice  # her own bucket
    assert len(await audit_rows(app, "oidc:u-666", len(replies), "manage_source")) == len(replies)
    assert len(await audit_rows(app, "oidc:u-101", 1, "manage_source")) == 1
    assert not await app.db.pool.fetchval("SELECT count(*) FROM audit_log WHERE who LIKE '%alice%'")
    buckets = await app.db.pool.fetch("SELECT key FROM rate_buckets WHERE key LIKE 'oidc:%'")
    assert not any("alice" in row["key"] for row in buckets), buckets


# --- after sign-in: `next` stays on this site ----------------------------------------------------------


@pytest.fixture(scope="module")
def evil() -> Iterator[FixtureSite]:
    with FixtureSite(with_defaults=False) as site:
        site.set_page("/", "<!doctype html><title>Evil</title><p>Phished.</p>")
        yield site


def next_variants(host: str) -> list[str]:
    """`next` as an attacker writes it into the sign-in link (raw query text)."""
    return [
        f"//{host}/",
        f"/\\{host}/",
        f"/%5C{host}/",
        f"%2F%5C{host}/",
        f"/%5C%5C{host}/",
        f"/%2F%2F{host}/",
        f"/%2F/{host}/",
        f"http://{host}/",
        f"http:{host}/",
        f"%09/{host}/",
        f"/%09/{host}/",
        f"/%0A/{host}/",
        f"/%255C{host}/",
        f"%20//{host}/",
    ]


def land(page: Any, start: str, away_from: tuple[str, ...], submit: str | None = None) -> str:
    """Where the browser settles after `start` (and, for the token form, submitting `submit`)."""
    page.goto(start)
    if submit is not None:
        page.fill("#token-input", submit)
        page.click("#signin-button")
    try:
        page.wait_for_url(lambda u: not u.startswith(away_from), timeout=20000)
        page.wait_for_load_state()
    except Exception as exc:
        raise AssertionError(f"stuck at {page.url}") from exc
    return str(page.url)


def follow_every_next(base: str, evil: str, idp: IdP, token: str) -> dict[tuple[str, str], str]:
    """Chromium signs in with the provider and with a token, once per `next` variant."""
    landed: dict[tuple[str, str], str] = {}
    host = urlsplit(evil).netloc
    with chromium() as browser:
        page = browser.new_page()
        for raw in [*next_variants(host), "%2Factivity%3Fhours%3D48"]:
            sso = land(page, f"{base}/signin/oidc?next={raw}", (f"{base}/signin/oidc", idp.issuer))
            form = land(page, f"{base}/signin?next={raw}", (f"{base}/signin",), submit=token)
            landed[(raw, "sso")], landed[(raw, "token")] = sso, form
    return landed


async def test_next_after_sign_in_stays_on_this_site(idp: IdP, url: str, world: World, evil: FixtureSite) -> None:
    """`next=/%5Cevil` (and its cousins) sent the browser to another site after signing in."""
    base = url.removesuffix("/mcp")
    idp.sign_in_as = "nina"
    landed = await asyncio.to_thread(follow_every_next, base, evil.url, idp, world.pub_secret)
    away = {key: where for key, where in landed.items() if not where.startswith(base + "/")}
    assert not away, away
    assert not evil.request_log, evil.request_log
    kept = f"{base}/activity?hours=48"  # a path on this site keeps its query string
    assert landed[("%2Factivity%3Fhours%3D48", "sso")] == kept
    assert landed[("%2Factivity%3Fhours%3D48", "token")] == kept


# --- sign-ins in progress belong to their browser ------------------------------------------------------


async def test_anonymous_sign_in_starts_cannot_push_out_a_sign_in(idp: IdP, url: str, world: World) -> None:
    """Each start used to hold a pending sign-in in one server-wide table of 1,000, oldest out first:
    a flood of anonymous starts evicted everyone's sign-in in progress."""
    base = url.removesuffix("/mcp")
    async with httpx.AsyncClient(timeout=60) as http:
        start = await http.get(f"{base}/signin/oidc", follow_redirects=False)
        assert start.status_code == 303
        cookie = {"Cookie": f"archivist_sso_state={start.cookies['archivist_sso_state']}"}
        limit = asyncio.Semaphore(8)
        # one transport for the strangers: kept-alive connections and no cookie jar (a client per start
        # cost more than the server's work), so each start arrives as a new browser's would
        strangers = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=8))

        async def anonymous() -> int:
            async with limit:
                reply = await strangers.handle_async_request(httpx.Request("GET", f"{base}/signin/oidc"))
                await reply.aclose()
                return reply.status_code

        async with strangers:
            flood = await asyncio.gather(*(anonymous() for _ in range(1100)))
        assert set(flood) == {303}
        idp.sign_in_as = "nina"
        back = await http.get(start.headers["location"], follow_redirects=False)
        finished = await http.get(back.headers["location"], headers=cookie, follow_redirects=False)
    assert finished.status_code == 200, finished.text
    assert "archivist_session" in finished.headers.get("set-cookie", "")


def test_safe_next_keeps_paths_on_this_site_only() -> None:
    kept = ["/", "/activity?hours=48", "/documents/1#top", "/search?q=a//b", "/search?q=%5C", "/a%20b"]
    assert [safe_next(p) for p in kept] == kept
    refused = [None, "", "//evil", "/\\evil", "/%5Cevil", "/%255Cevil", "/%25255Cevil", "/%2F%2Fevil", "/%2F/evil"]
    refused += ["https://evil", "evil", "\t/evil", "/\t/evil", "/%09/evil", " //evil", "/x?q=\n", "/" + "a" * 2000]
    assert {safe_next(p) for p in refused} == {"/"}
