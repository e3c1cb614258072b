"""Identity from the team's own login (issue 20): a real `archivist serve --http` with
ARCHIVIST_OAUTH_ISSUER pointing at a real OAuth/OpenID provider on 127.0.0.1 (tests/security/oidc_idp.py),
driven by the mcp SDK's streamable-HTTP client, including its own 401 -> metadata -> login flow."""

from __future__ import annotations

import argparse
import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import jwt as pyjwt
import pytest
import pytest_asyncio
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from commands.access import cli_audit
from services.access.oauth import Identity
from services.access.scope import Scope, use_scope
from services.access.token_cache import TokenCache
from services.core.errors import NotFound
from tests.e2e.test_e2e import server_env
from tests.security.oidc_idp import Client as IdpClient
from tests.security.oidc_idp import IdP, new_key, running
from tests.security.support import World, all_resources, audit_rows, bearer_client, build_world, http_server, rpc_error
from tests.support.cli_process import run_in_process
from tests.support.mcp_helpers import call

USERS = {
    "alice": {"email": "alice@example.com", "email_verified": True, "groups": ["eng"]},  # eng -> profile pub
    "bob": {"email": "bob@example.com", "email_verified": True, "groups": ["sales"]},  # sales -> sec (read-only)
    "carol": {"email": "carol@partner.org", "email_verified": True},  # the partner.org domain -> profile pub
    "mallory": {"email": "mallory@partner.org", "email_verified": False},  # unverified: no domain grant
    "dave": {"email": "dave@example.com", "email_verified": True, "groups": ["interns"]},  # no grant at all
}
REDIRECT = "http://127.0.0.1:9/callback"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.fixture(scope="module")
def idp() -> Iterator[IdP]:
    provider = IdP(USERS)
    provider.clients["agent"] = IdpClient("agent", "agent-secret", claims={"groups": ["eng"]})
    provider.clients["opaque-agent"] = IdpClient("opaque-agent", "s2", claims={"groups": ["eng"]}, opaque=True)
    provider.clients["archivist"] = IdpClient("archivist", "rs-secret")  # the server's own, for introspection
    provider.clients["desktop"] = IdpClient("desktop", None, redirect_uris=[REDIRECT])  # a public MCP client
    with running(provider):
        yield provider


@pytest_asyncio.fixture(scope="module")
async def world(app: Any) -> World:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        built = await build_world(app)
        await app.grants.grant("pub", "group", "eng")
        await app.grants.grant("sec", "group", "sales")
        await app.grants.grant("pub", "email_domain", "partner.org")
        return built


@pytest_asyncio.fixture(scope="module")
async def url(idp: IdP, world: World, database_url: str, files_dir: Path) -> AsyncIterator[str]:
    env = {
        "ARCHIVIST_OAUTH_ISSUER": idp.issuer,
        "ARCHIVIST_OAUTH_REQUIRED_SCOPES": "archivist",
        "ARCHIVIST_OAUTH_CLIENT_ID": "archivist",
        "ARCHIVIST_OAUTH_CLIENT_SECRET": "rs-secret",
        "ARCHIVIST_OAUTH_JWKS_CACHE_SECONDS": "2",
        "ARCHIVIST_OAUTH_JWKS_MIN_REFRESH_SECONDS": "0",
    }
    async with http_server(database_url, files_dir, **env) as served:
        yield served


def user_token(idp: IdP, url: str, user: str, scope: str = "archivist", **overrides: Any) -> str:
    return idp.mint(user, url, scope, **overrides)


async def post_initialize(url: str, token: str | None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(url, json=INITIALIZE, headers=headers)


async def source_titles(url: str, token: str) -> set[str]:
    async with bearer_client(url, token) as client:
        reply = await call(client, "manage_source", action="list")
    assert reply["success"], reply
    return {s["title"] for s in reply["sources"]}


def public_only(titles: set[str]) -> bool:
    """Profile pub's sources (and any a write test made into it), none of profile sec's."""
    return {"Public", "Shared"} <= titles and "Secret" not in titles


async def test_a_valid_issuer_token_works_through_the_sdk_client(idp: IdP, url: str, world: World) -> None:
    token = await asyncio.to_thread(idp.client_token, "agent", url, "archivist")
    async with bearer_client(url, token) as client:
        reply = await call(client, "search_knowledge_base", query="when does the office open")
        names = {r.name for r in await all_resources(client)}
    assert reply["success"], reply
    assert "kettle" in str(reply) and "310,000" not in str(reply)
    assert "Handbook" in names and "Salaries" not in names


async def test_groups_map_onto_profiles(idp: IdP, url: str, world: World) -> None:
    assert await source_titles(url, user_token(idp, url, "alice")) == {"Public", "Shared"}
    bob = await source_titles(url, user_token(idp, url, "bob"))
    assert "Secret" in bob and "Public" not in bob
    assert await source_titles(url, user_token(idp, url, "carol")) == {"Public", "Shared"}  # email domain


async def test_bad_tokens_get_401_while_a_good_one_gets_in(idp: IdP, url: str, world: World) -> None:
    good = await post_initialize(url, user_token(idp, url, "alice"))
    assert good.status_code == 200, good.text
    now = int(time.time())
    skewed = await post_initialize(url, user_token(idp, url, "alice", exp=now - 20))  # within the clock skew
    assert skewed.status_code == 200, skewed.text
    other = IdP(USERS)
    with running(other):
        foreign = other.mint("alice", url, "archivist")  # another issuer, the right audience
    stranger_key = new_key()
    claims = idp.claims_for(IdpClient("x", "y"), "alice", "archivist", url)
    kid = {"kid": idp.keys[0].kid}
    bad = {
        "unsigned (alg none)": pyjwt.encode(claims, None, algorithm="none", headers=kid),
        "shared secret (HS256)": pyjwt.encode(claims, "guessable-secret-" * 2, algorithm="HS256", headers=kid),
        "wrong audience": user_token(idp, url, "alice", aud="http://127.0.0.1:1/mcp"),
        "expired": user_token(idp, url, "alice", iat=now - 7200, exp=now - 3600),
        "not yet valid": user_token(idp, url, "alice", nbf=now + 3600),
        "wrong issuer": foreign,
        "issuer claim forged": user_token(idp, url, "alice", iss="http://127.0.0.1:1"),
        "unknown key": idp.sign(claims, key=stranger_key),
        "garbage": "not-a-token",
    }
    for why, token in bad.items():
        response = await post_initialize(url, token)
        assert response.status_code == 401, (why, response.status_code, response.text)
        assert 'resource_metadata="' in response.headers["www-authenticate"], why
        assert 'error="invalid_token"' in response.headers["www-authenticate"], why


async def test_a_valid_token_without_the_required_scope_gets_403(idp: IdP, url: str, world: World) -> None:
    """RFC 6750 section 3.1: a good token lacking the scope is 403 insufficient_scope, not 401 (which
    would send a client to sign in again for the same token); JWT and introspected alike."""
    opaque = await asyncio.to_thread(idp.client_token, "opaque-agent", url, "email")
    for token in (user_token(idp, url, "alice", scope="email"), user_token(idp, url, "alice", scope=""), opaque):
        response = await post_initialize(url, token)
        assert response.status_code == 403, (response.status_code, response.text)
        challenge = response.headers["www-authenticate"]
        assert challenge.startswith("Bearer ") and 'error="insufficient_scope"' in challenge, challenge
        assert 'resource_metadata="' in challenge and "archivist" in challenge, challenge
        assert response.json()["error"] == "insufficient_scope"
    assert (await post_initialize(url, user_token(idp, url, "alice"))).status_code == 200


async def test_without_the_write_scope_access_is_read_only(idp: IdP, url: str, world: World) -> None:
    async with bearer_client(url, user_token(idp, url, "bob")) as reader:
        refused = await call(reader, "manage_source", action="create", title="Bob's notes")
        listed = await call(reader, "manage_source", action="list")
    assert listed["success"], listed
    assert refused["error_code"] == "PERMISSION_DENIED", refused
    async with bearer_client(url, user_token(idp, url, "bob", scope="archivist archivist:write")) as writer:
        made = await call(writer, "manage_source", action="create", title="Bob's notes")
    assert made["success"], made


async def test_a_write_grant_allows_writes_without_the_scope(app: Any, idp: IdP, url: str, world: World) -> None:
    token = user_token(idp, url, "carol")
    async with bearer_client(url, token) as client:
        refused = await call(client, "manage_source", action="create", title="Carol's")
    assert refused["error_code"] == "PERMISSION_DENIED", refused
    await app.grants.grant("pub", "email_domain", "partner.org", write=True)
    try:
        async with bearer_client(url, token) as client:
            made = await call(client, "manage_source", action="create", title="Carol's")
        assert made["success"], made
    finally:
        await app.grants.grant("pub", "email_domain", "partner.org", write=False)


async def test_a_token_with_no_mapping_is_told_why_on_every_call(idp: IdP, url: str, world: World) -> None:
    for user in ("dave", "mallory"):
        token = user_token(idp, url, user)
        assert (await post_initialize(url, token)).status_code == 200  # signed in: no 401 loop
        async with bearer_client(url, token) as client:
            reply = await call(client, "search_knowledge_base", query="salaries")
            listed = await rpc_error(client.list_resources())
        assert reply["error_code"] == "PERMISSION_DENIED", reply
        assert "no Archivist profile is granted" in reply["error"] and "profile grant" in reply["suggestion"]
        assert "no Archivist profile is granted" in listed, listed
        assert "310,000" not in str(reply) + listed


async def test_opaque_tokens_are_introspected(idp: IdP, url: str, world: World) -> None:
    token = await asyncio.to_thread(idp.client_token, "opaque-agent", url, "archivist")
    assert token.count(".") != 2
    assert public_only(await source_titles(url, token))
    assert (await post_initialize(url, token + "x")).status_code == 401


async def test_introspection_is_cached_for_the_tokens_lifetime(idp: IdP, url: str, world: World) -> None:
    """An opaque token is introspected once, then its answer serves later requests (at most 60 s, never
    past the token's `exp`); a refusal is not cached."""
    token = await asyncio.to_thread(idp.client_token, "opaque-agent", url, "archivist")
    for _ in range(3):
        assert (await post_initialize(url, token)).status_code == 200
    assert public_only(await source_titles(url, token))  # a whole MCP session: several requests
    assert idp.introspected.count(token) == 1

    wrong = token + "x"
    for _ in range(2):
        assert (await post_initialize(url, wrong)).status_code == 401
    assert idp.introspected.count(wrong) == 2

    expires = int(time.time()) + 3
    short = secrets.token_urlsafe(32)
    idp.opaque[short] = {**idp.claims_for(idp.clients["opaque-agent"], None, "archivist", url), "exp": expires}
    for _ in range(2):
        assert (await post_initialize(url, short)).status_code == 200
    assert idp.introspected.count(short) == 1
    await asyncio.sleep(expires - time.time() + 0.5)  # expired at the issuer, within Archivist's leeway
    assert (await post_initialize(url, short)).status_code == 401  # asked again: no longer active
    assert idp.introspected.count(short) == 2


def test_the_introspection_cache_is_bounded_and_ends_with_the_token() -> None:
    now = [1000.0]
    cache: TokenCache[Identity] = TokenCache(60, max_entries=3, clock=lambda: now[0], wall=lambda: now[0])
    person = Identity(issuer="i", subject="s")
    for n in range(4):
        cache.put(f"t{n}", person, None)
    assert cache.get("t0") is None and cache.get("t3") == person  # the oldest left
    assert cache.get("t1") == person  # used: now the newest
    cache.put("t4", person, None)
    assert cache.get("t2") is None and cache.get("t1") == person
    cache.put("soon", person, now[0] + 5)
    cache.put("gone", person, now[0] - 1)  # already expired: not kept
    assert cache.get("gone") is None and cache.get("soon") == person
    now[0] += 6
    assert cache.get("soon") is None and cache.get("t1") == person  # its exp, not the 60 s, ended it
    now[0] += 60
    assert cache.get("t1") is None
    off: TokenCache[Identity] = TokenCache(0)  # ARCHIVIST_OAUTH_INTROSPECTION_CACHE_SECONDS=0
    off.put("t", person, None)
    assert off.get("t") is None


async def test_archivist_tokens_work_beside_the_issuers(idp: IdP, url: str, world: World) -> None:
    assert public_only(await source_titles(url, world.pub_secret))
    assert await source_titles(url, user_token(idp, url, "bob")) >= {"Secret"}
    assert (await post_initialize(url, None)).status_code == 401  # with an issuer, loopback is no open door


async def test_healthz_details_stay_with_the_operator(idp: IdP, url: str, world: World) -> None:
    health = url.removesuffix("/mcp") + "/healthz"
    assert (await post_initialize(url, user_token(idp, url, "alice"))).status_code == 200  # she is in
    async with httpx.AsyncClient(timeout=30) as http:
        person = await http.get(health, headers={"Authorization": f"Bearer {user_token(idp, url, 'alice')}"})
        operator = await http.get(health, headers={"Authorization": f"Bearer {world.pub_secret}"})
    assert set(person.json()) == {"ok"}, person.text
    assert len(operator.json()) > 1, operator.text


async def test_the_401_and_metadata_discovery_as_a_client_sees_it(idp: IdP, url: str, world: World) -> None:
    refused = await post_initialize(url, None)
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and "resource_metadata=" in challenge
    metadata_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
    async with httpx.AsyncClient() as http:
        metadata = (await http.get(metadata_url)).json()
        bare = (await http.get(url.removesuffix("/mcp") + "/.well-known/oauth-protected-resource")).json()
    assert metadata == bare
    assert metadata["resource"] == url and metadata["authorization_servers"] == [idp.issuer]
    assert set(metadata["scopes_supported"]) == {"archivist", "archivist:write"}

    # The SDK's own OAuth client: 401 -> protected-resource metadata -> issuer metadata -> PKCE login
    # (signing in as alice) -> token for this resource -> the call goes through.
    idp.sign_in_as = "alice"
    redirect: dict[str, str] = {}

    async def follow(authorization_url: str) -> None:
        async with httpx.AsyncClient() as http:
            answer = await http.get(authorization_url, follow_redirects=False)
        assert answer.status_code == 302, answer.text
        redirect.update({k: v[0] for k, v in parse_qs(urlsplit(answer.headers["location"]).query).items()})

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=redirect["code"], state=redirect.get("state"))

    storage = MemoryStorage(OAuthClientInformationFull(client_id="desktop", redirect_uris=[REDIRECT]))
    auth = OAuthClientProvider(
        url,
        OAuthClientMetadata(redirect_uris=[REDIRECT], token_endpoint_auth_method="none"),
        storage,
        redirect_handler=follow,
        callback_handler=callback,
    )
    transport = streamable_http_client(url, http_client=httpx2.AsyncClient(auth=auth, timeout=60))
    async with Client(transport) as client:
        reply = await call(client, "manage_source", action="list")
    assert reply["success"], reply
    assert public_only({s["title"] for s in reply["sources"]})
    assert storage.tokens is not None and "code" in redirect


async def test_the_audit_names_the_person(app: Any, idp: IdP, url: str, world: World, capsys: Any) -> None:
    async with bearer_client(url, user_token(idp, url, "alice")) as client:
        await call(client, "manage_source", action="list")
    rows = await audit_rows(app, "oidc:alice@example.com", 1, "manage_source")
    assert rows and rows[-1]["error_code"] is None
    agent = await asyncio.to_thread(idp.client_token, "agent", url, "archivist")
    async with bearer_client(url, agent) as client:
        await call(client, "manage_source", action="list")
    assert await audit_rows(app, "oidc:agent", 1, "manage_source")  # a client-credentials agent: its client id
    async with bearer_client(url, user_token(idp, url, "dave")) as client:
        await call(client, "manage_source", action="list")
    denied = await audit_rows(app, "oidc:dave@example.com", 1)
    assert denied and denied[0]["error_code"] == "PERMISSION_DENIED"
    args = argparse.Namespace(
        prune=False, since="1h", tool=None, token="oidc:alice@example.com", errors=False, page=1, json=False
    )
    await cli_audit(app, args)
    assert "oidc:alice@example.com" in capsys.readouterr().out


async def test_grants_need_a_profile_and_revoke(app: Any, world: World) -> None:
    with pytest.raises(NotFound):
        await app.grants.grant("no-such-profile", "group", "eng")
    await app.grants.grant("sec", "subject", "someone")
    assert any(g.kind == "subject" for g in await app.grants.list("sec"))
    await app.grants.revoke("sec", "subject", "someone")
    assert not any(g.kind == "subject" for g in await app.grants.list("sec"))


def test_profile_grant_and_revoke_through_the_cli(database_url: str, files_dir: Path, world: World) -> None:
    env = server_env(database_url, files_dir)
    granted = run_in_process(["profile", "grant", "sec", "--group", "ops", "--write"], env)
    assert granted.returncode == 0, granted.stderr
    assert "granted sec to group ops (read-write)" in granted.stdout
    listed = run_in_process(["profile", "grants", "sec"], env).stdout
    assert "ops" in listed and "write" in listed and "sales" in listed
    revoked = run_in_process(["profile", "revoke", "sec", "--group", "ops"], env)
    assert revoked.returncode == 0, revoked.stderr
    assert "ops" not in run_in_process(["profile", "grants", "sec"], env).stdout
    missing = run_in_process(["profile", "grant", "nope", "--email-domain", "example.com"], env)
    assert missing.returncode != 0 and "nope" in missing.stderr


async def test_key_rotation_works_without_a_restart(idp: IdP, url: str, world: World) -> None:
    old = user_token(idp, url, "alice")
    assert (await post_initialize(url, old)).status_code == 200
    idp.rotate(keep_old=True)  # rollover: a new signing key, the old one still published
    new = user_token(idp, url, "alice")
    assert (await post_initialize(url, new)).status_code == 200  # unknown kid: keys fetched again
    assert (await post_initialize(url, old)).status_code == 200
    idp.rotate(keep_old=False)  # the old keys are withdrawn
    newest = user_token(idp, url, "alice")
    assert (await post_initialize(url, newest)).status_code == 200
    await asyncio.sleep(2.5)  # ARCHIVIST_OAUTH_JWKS_CACHE_SECONDS
    assert (await post_initialize(url, old)).status_code == 401
    assert (await post_initialize(url, new)).status_code == 401
    assert (await post_initialize(url, newest)).status_code == 200


async def test_the_console_asks_for_sign_in_as_mcp_does(app: Any, url: str, world: World) -> None:
    # last in this module: with no Archivist token left, a loopback console would be open on main
    await app.tokens.revoke("pub-reader")
    async with httpx.AsyncClient(timeout=30) as http:
        page = await http.get(url.removesuffix("/mcp") + "/", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"].startswith("/signin"), page.status_code


class MemoryStorage:
    """The SDK client's token storage, pre-registered as the provider's public client `desktop`."""

    def __init__(self, client: OAuthClientInformationFull) -> None:
        self.client = client
        self.tokens: OAuthToken | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info
