"""Console single sign-on with the team's identity provider (issue 20, point 4): OpenID Connect
authorization code flow with PKCE, `state` and `nonce` checked.

`start()` remembers a pending login (state -> nonce, PKCE verifier, where to go next) and returns the
provider's authorization URL; `finish()` takes the state and code the provider sent back, exchanges the
code (with the verifier), checks the ID token (signature by the issuer's JWKS, `iss`, `aud` = the
console's client id, `exp`, `nonce`) and returns the `Identity` it names. Which profiles that identity
reaches is decided per request by the same grants as for MCP tokens (services/access/identity.py).
No web framework here: web/ turns these into redirects and a session.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt

from services.access.oauth import ALGORITHMS, Identity, InvalidToken, OAuthVerifier, identity_from_claims

PENDING_SECONDS = 600.0  # a sign-in left unfinished this long is forgotten
MAX_PENDING = 1000
SCOPES = "openid email profile"


@dataclass(frozen=True)
class Pending:
    nonce: str
    verifier: str
    next_path: str
    started: float


@dataclass(frozen=True)
class SignedIn:
    """A finished sign-in: who, until when (the ID token's expiry, capped by the provider's session)."""

    identity: Identity
    expires_at: float
    id_token: str  # the hint for the provider's sign-out

    @property
    def name(self) -> str:
        return self.identity.label

    @property
    def active(self) -> bool:
        return time.time() < self.expires_at


def s256(verifier: str) -> str:
    """The PKCE S256 challenge (RFC 7636 §4.2): base64url(SHA-256(verifier)), unpadded."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


class OidcLogin:
    def __init__(self, oauth: OAuthVerifier, client_id: str, client_secret: str | None, redirect_uri: str) -> None:
        self.oauth = oauth
        self.client_id = client_id
        self.client_secret = client_secret
        self.redirect_uri = redirect_uri
        self.pending: dict[str, Pending] = {}

    @property
    def issuer(self) -> str:
        return self.oauth.config.issuer

    async def start(self, next_path: str) -> tuple[str, str]:
        """(the provider's authorization URL, the state to bind to this browser)."""
        metadata = await self.oauth.keys.metadata()
        endpoint = metadata.get("authorization_endpoint")
        if not endpoint:
            raise InvalidToken("the issuer's metadata has no authorization_endpoint")
        self._forget_old()
        state, nonce, verifier = secrets.token_urlsafe(24), secrets.token_urlsafe(24), secrets.token_urlsafe(48)
        self.pending[state] = Pending(nonce, verifier, next_path, time.monotonic())
        query = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "scope": SCOPES,
            "state": state,
            "nonce": nonce,
            "code_challenge": s256(verifier),
            "code_challenge_method": "S256",
        }
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(query)}", state

    def _forget_old(self) -> None:
        now = time.monotonic()
        for state in [s for s, p in self.pending.items() if now - p.started > PENDING_SECONDS]:
            self.pending.pop(state, None)
        while len(self.pending) >= MAX_PENDING:
            self.pending.pop(next(iter(self.pending)))

    async def finish(self, state: str, code: str) -> tuple[SignedIn, str]:
        """(the signed-in identity, the path to go next); InvalidToken says why a sign-in failed."""
        pending = self.pending.pop(state, None) if state else None
        if pending is None or time.monotonic() - pending.started > PENDING_SECONDS:
            raise InvalidToken("unknown or expired sign-in state")
        tokens = await self._exchange(code, pending.verifier)
        id_token = tokens.get("id_token")
        if not isinstance(id_token, str):
            raise InvalidToken("the provider returned no ID token")
        claims = await self._check_id_token(id_token, pending.nonce)
        identity = identity_from_claims(claims, self.oauth.config)
        return SignedIn(identity, float(claims["exp"]), id_token), pending.next_path

    async def _exchange(self, code: str, verifier: str) -> dict[str, Any]:
        endpoint = (await self.oauth.keys.metadata()).get("token_endpoint")
        if not endpoint:
            raise InvalidToken("the issuer's metadata has no token_endpoint")
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "code_verifier": verifier,
            "client_id": self.client_id,
        }
        auth = (self.client_id, self.client_secret) if self.client_secret else None
        try:
            response = await self.oauth.client.post(endpoint, data=form, auth=auth)
            response.raise_for_status()
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise InvalidToken(f"the code exchange failed: {exc}") from None
        return body if isinstance(body, dict) else {}

    async def _check_id_token(self, id_token: str, nonce: str) -> dict[str, Any]:
        try:
            alg = jwt.get_unverified_header(id_token).get("alg")
            if alg not in ALGORITHMS:
                raise InvalidToken(f"ID token algorithm {alg!r} is not accepted")
            kid = jwt.get_unverified_header(id_token).get("kid")
            key = jwt.PyJWK(await self.oauth.keys.key(kid), algorithm=alg)
            claims = jwt.decode(
                id_token,
                key.key,
                algorithms=[alg],
                audience=self.client_id,
                issuer=self.issuer,
                leeway=self.oauth.config.leeway_seconds,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"ID token refused: {exc}") from None
        if not secrets.compare_digest(str(claims.get("nonce", "")), nonce):
            raise InvalidToken("the ID token's nonce does not match this sign-in")
        return dict(claims)

    async def end_session_url(self, id_token: str, after: str) -> str | None:
        """The provider's RP-initiated logout URL, when it has one."""
        try:
            endpoint = (await self.oauth.keys.metadata()).get("end_session_endpoint")
        except InvalidToken:
            return None
        if not endpoint:
            return None
        query = urlencode({"id_token_hint": id_token, "post_logout_redirect_uri": after, "client_id": self.client_id})
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"
