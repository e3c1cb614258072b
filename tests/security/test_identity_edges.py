"""Issue 27 point 5: the edges of identity fail closed. A real `archivist serve --http` trusts a real
OpenID provider on 127.0.0.1 (tests/security/oidc_idp.py); each test is an attack that got through
before its fix:

- an email counts for `--email-domain` grants (and names the caller) only with `email_verified: true`;
- an introspection answer must name this resource in `aud`;
- the audit name and the rate bucket never come from a display name (`preferred_username`).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.mcp_helpers import call
from tests.security.oidc_idp import Client as IdpClient
from tests.security.oidc_idp import IdP, running
from tests.security.support import World, audit_rows, bearer_client, build_world, http_server
from tests.security.test_oauth import post_initialize

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
    async with bearer_client(url, idp.mint("u-666", url, "archivist")) as mallory:
        replies = [await call(mallory, "manage_source", action="list") for _ in range(RATE + 1)]
    assert replies[-1]["error_code"] == "RATE_LIMITED", replies[-1]
    alice = await list_sources(url, idp.mint("u-101", url, "archivist"))
    assert alice["success"], alice  # her own bucket
    assert len(await audit_rows(app, "oidc:u-666", RATE + 1, "manage_source")) == RATE + 1
    assert len(await audit_rows(app, "oidc:u-101", 1, "manage_source")) == 1
    assert not await app.db.pool.fetchval("SELECT count(*) FROM audit_log WHERE who LIKE '%alice%'")
    buckets = await app.db.pool.fetch("SELECT key FROM rate_buckets WHERE key LIKE 'oidc:%'")
    assert not any("alice" in row["key"] for row in buckets), buckets
