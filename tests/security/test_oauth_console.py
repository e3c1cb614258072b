"""Console single sign-on with the team's identity provider (issue 20, point 4): Debian's Chromium signs
in through a real OpenID provider on 127.0.0.1 (authorization code + PKCE, state and nonce checked),
and the session follows the same grants as MCP tokens."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from services.access.scope import Scope, use_scope
from tests.security.oidc_idp import Client as IdpClient
from tests.security.oidc_idp import IdP, running
from tests.security.support import World, build_world, http_server
from tests.support.web_helpers import chromium

USERS = {
    "alice": {"email": "alice@example.com", "email_verified": True, "groups": ["eng"]},  # eng -> profile pub
    "dave": {"email": "dave@example.com", "email_verified": True, "groups": ["interns"]},  # no grant
}


@pytest.fixture(scope="module")
def idp() -> Iterator[IdP]:
    provider = IdP(USERS)
    provider.clients["archivist"] = IdpClient("archivist", "rs-secret")  # the console's client
    with running(provider):
        yield provider


@pytest_asyncio.fixture(scope="module")
async def world(app: Any) -> World:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        built = await build_world(app)
        await app.grants.grant("pub", "group", "eng")
        return built


@pytest_asyncio.fixture(scope="module")
async def base(idp: IdP, world: World, database_url: str, files_dir: Path) -> AsyncIterator[str]:
    env = {
        "ARCHIVIST_OAUTH_ISSUER": idp.issuer,
        "ARCHIVIST_OAUTH_CLIENT_ID": "archivist",
        "ARCHIVIST_OAUTH_CLIENT_SECRET": "rs-secret",
    }
    async with http_server(database_url, files_dir, **env) as url:
        served = url.removesuffix("/mcp")
        idp.clients["archivist"].redirect_uris.append(f"{served}/signin/oidc/callback")
        yield served


def arrive(page: Any, url: str) -> None:
    """Wait until the browser is back at `url`; say where it is stuck otherwise."""
    try:
        page.wait_for_url(url, timeout=20000)
        page.wait_for_load_state()
    except Exception as exc:
        raise AssertionError(f"stuck at {page.url}: {page.content()[:600]}") from exc


def sign_in(base: str) -> dict[str, str]:
    """Chromium: the console -> sign-in page -> "Sign in with <issuer>" -> the provider -> back."""
    with chromium() as browser:
        page = browser.new_page()
        page.goto(f"{base}/")
        assert "/signin" in page.url
        page.click("#sso-link")
        arrive(page, f"{base}/")
        seen = {"home": page.content()}
        page.click("text=Sign out")
        page.wait_for_url(f"{base}/signin*", timeout=20000)
        page.goto(f"{base}/")
        seen["after_sign_out"] = page.url
        return seen


async def test_sign_in_with_the_provider_sees_the_granted_profile(app: Any, idp: IdP, base: str, world: World) -> None:
    idp.sign_in_as = "alice"
    seen = await asyncio.to_thread(sign_in, base)
    assert "alice@example.com" in seen["home"]
    assert "Public" in seen["home"] and "Secret" not in seen["home"]
    assert "/signin" in seen["after_sign_out"]  # signing out ended the session


async def test_an_identity_without_a_grant_is_told_why(idp: IdP, base: str, world: World) -> None:
    idp.sign_in_as = "dave"

    def look() -> str:
        with chromium() as browser:
            page = browser.new_page()
            page.goto(f"{base}/signin")
            page.click("#sso-link")
            arrive(page, f"{base}/")
            return page.content()

    html = await asyncio.to_thread(look)
    assert "no Archivist profile is granted" in html and "Salaries" not in html and "Public" not in html


async def test_a_forged_or_replayed_callback_is_refused(idp: IdP, base: str, world: World) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        forged = await http.get(f"{base}/signin/oidc/callback", params={"state": "forged", "code": "x"})
        start = await http.get(f"{base}/signin/oidc", follow_redirects=False)
        assert start.status_code == 303
        # the state cookie is Secure (as a browser keeps it for 127.0.0.1); httpx sends it only when told
        cookie = {"Cookie": f"archivist_sso_state={start.cookies['archivist_sso_state']}"}
        idp.sign_in_as = "alice"
        back = await http.get(start.headers["location"], follow_redirects=False)
        callback = back.headers["location"]
        other = httpx.AsyncClient(timeout=30)  # another browser: no state cookie
        async with other:
            stolen = await other.get(callback, follow_redirects=False)
        own = await http.get(callback, headers=cookie, follow_redirects=False)
        replay = await http.get(callback, headers=cookie, follow_redirects=False)
    assert forged.status_code == 400 and "archivist_session" not in forged.headers.get("set-cookie", "")
    assert stolen.status_code == 400, stolen.text
    assert own.status_code == 200 and "archivist_session" in own.headers.get("set-cookie", ""), own.text
    assert replay.status_code == 400
