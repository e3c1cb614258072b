"""Console sign-in with the team's identity provider (issue 20, point 4; docs/identity.md).

With ARCHIVIST_OAUTH_ISSUER and ARCHIVIST_OAUTH_CLIENT_ID set, the sign-in page offers "Sign in with
<issuer>": `/signin/oidc` starts an OpenID Connect authorization code flow with PKCE (state and nonce,
services/access/oidc_login.py) and keeps it, sealed, in this browser's cookie; the provider sends the
browser back to `/signin/oidc/callback`, which accepts only that browser's state, checks the ID token and
opens a console session holding the identity (never a token). What the session may see is worked out
on every request from the identity's grants (services/access/identity.py), as for MCP tokens; it ends at
the ID token's expiry or on sign-out.
"""

from __future__ import annotations

import html
import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from services.access.oauth import InvalidToken, OAuthConfig, OAuthVerifier
from services.access.oidc_login import PENDING_SECONDS, OidcLogin, SignedIn
from services.core.settings import Settings
from web import auth

logger = logging.getLogger(__name__)
STATE_COOKIE = "archivist_sso_state"
CALLBACK = "/signin/oidc/callback"


def is_sign_in(value: Any) -> bool:
    return isinstance(value, SignedIn)


def issuer_of(settings: Settings) -> str | None:
    """The issuer the sign-in page offers, when the console has a client there."""
    if getattr(settings, "oauth_issuer", None) and getattr(settings, "oauth_client_id", None):
        return str(settings.oauth_issuer)
    return None


def login_for(console: Any, request: Request) -> OidcLogin:
    """The console's OIDC client (one per server), its redirect URI on the server's public URL."""
    login = getattr(console, "_oidc_login", None)
    if login is None:
        settings = console.settings
        base = (getattr(settings, "public_url", None) or f"{request.url.scheme}://{request.url.netloc}").rstrip("/")
        config = OAuthConfig.from_settings(settings, default_audience=f"{base}/mcp")
        assert config is not None and config.client_id
        login = OidcLogin(OAuthVerifier(config), config.client_id, config.client_secret, base + CALLBACK)
        console._oidc_login = login
    return login


def refusal(message: str) -> HTMLResponse:
    """A plain page (no session, no console chrome) for a sign-in that did not complete."""
    body = (
        "<!doctype html><title>Sign-in failed</title><h1>Sign-in failed</h1>"
        f"<p>{html.escape(message)}</p><p><a href='/signin'>Try again</a></p>"
    )
    return HTMLResponse(body, status_code=400)


def routes(console: Any) -> list[Route]:
    async def start(request: Request) -> Response:
        if issuer_of(console.settings) is None:
            return refusal("Sign-in with an identity provider is not configured on this server.")
        next_path = auth.safe_next(request.query_params.get("next"))
        try:
            url, sealed = await login_for(console, request).start(next_path)
        except InvalidToken as exc:
            logger.warning("console sign-in could not start: %s", exc)
            return refusal("The identity provider could not be reached. Try again later.")
        response = RedirectResponse(url, 303)
        # Lax, not Strict: the provider's redirect back is a cross-site navigation
        secure = auth.secure_cookie(request, console.secure_cookies)
        response.set_cookie(
            STATE_COOKIE, sealed, max_age=PENDING_SECONDS, httponly=True, samesite="lax", secure=secure, path="/"
        )
        return response

    async def callback(request: Request) -> Response:
        code = request.query_params.get("code", "")
        if issuer_of(console.settings) is None:
            return refusal("Sign-in with an identity provider is not configured on this server.")
        login = login_for(console, request)
        pending = login.pending(request.cookies.get(STATE_COOKIE), request.query_params.get("state", ""))
        if pending is None:
            return refusal("This sign-in was not started in this browser, or it has expired. Sign in again.")
        if request.query_params.get("error") or not code:
            return refusal(f"The identity provider refused: {request.query_params.get('error', 'no code')}.")
        try:
            signed_in, next_path = await login.finish(pending, code)
        except InvalidToken as exc:
            logger.info("console sign-in refused: %s", exc)
            return refusal("The identity provider's answer could not be verified.")
        console.sessions.close(request.cookies.get(auth.SESSION_COOKIE))
        # A page that moves on by itself: the navigation it starts is same-site, so the Strict session
        # cookie goes with it (it would not on a redirect chained to the provider's cross-site one).
        target = html.escape(next_path, quote=True)
        response = HTMLResponse(
            f"<!doctype html><meta http-equiv='refresh' content='0;url={target}'><title>Signed in</title>"
            f"<p>Signed in. <a href='{target}'>Continue</a></p>"
        )
        session = console.sessions.open(signed_in, signed_in.identity.bucket)  # its own sessions only
        console.set_cookie(response, request, auth.SESSION_COOKIE, session)
        response.delete_cookie(STATE_COOKIE, path="/")
        return response

    return [Route("/signin/oidc", start, methods=["GET"]), Route(CALLBACK, callback, methods=["GET"])]
