"""Console single sign-on with the team's identity provider (issue 20, point 4): OpenID Connect
authorization code flow with PKCE, `state` and `nonce` checked.

`start()` returns the provider's authorization URL and the sign-in in progress (state, nonce, PKCE
verifier, where to go next) sealed for the browser's cookie; `finish()` takes that cookie back with the
state and code the provider sent, exchanges the code (with the verifier), checks the ID token
(signature by the issuer's JWKS, `iss`, `aud` = the console's client id, `exp`, `nonce`) and returns the
`Identity` it names. Which profiles that identity reaches is decided per request by the same grants as
for MCP tokens (services/access/identity.py). No web framework here: web/ turns these into redirects and
a session.

A sign-in in progress lives in the browser that started it, never in a server-wide table: the cookie is
sealed (Fernet: AES and an HMAC, by `cryptography`) with a key this process holds in memory, and lasts
`PENDING_SECONDS`. One browser has one sign-in in progress (its cookie); anonymous starts cost the server
nothing it keeps, so no flood of them can push out another browser's sign-in (issue 27). A finished
state is remembered until it would have expired, so a callback cannot be replayed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt
from cryptography.fernet import Fernet
from cryptography.fernet import InvalidToken as BadSeal

from services.access.oauth import ALGORITHMS, Identity, InvalidToken, OAuthVerifier, identity_from_claims

PENDING_SECONDS = 600  # a sign-in left unfinished this long is refused
MAX_FINISHED = 10_000  # finished states remembered against replay (each needs a real provider sign-in)
SCOPES = "openid email profile"


@dataclass(frozen=True)
class Pending:
    """A sign-in in progress, as its browser's cookie carries it (sealed)."""

    state: str
    nonce: str
    verifier: str
    next_path: str


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
        self._sealer = Fernet(Fernet.generate_key())  # per process: a restart asks to sign in again
        self._finished: OrderedDict[str, float] = OrderedDict()  # state -> when its cookie expires

    @property
    def issuer(self) -> str:
        return self.oauth.config.issuer

    async def start(self, next_path: str) -> tuple[str, str]:
        """(the provider's authorization URL, the sealed sign-in for this browser's cookie)."""
        metadata = await self.oauth.keys.metadata()
        endpoint = metadata.get("authorization_endpoint")
        if not endpoint:
            raise InvalidToken("the issuer's metadata has no authorization_endpoint")
        pending = Pending(secrets.token_urlsafe(24), secrets.token_urlsafe(24), secrets.token_urlsafe(48), next_path)
        query = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "scope": SCOPES,
            "state": pending.state,
            "nonce": pending.nonce,
            "code_challenge": s256(pending.verifier),
            "code_challenge_method": "S256",
        }
        sealed = self._sealer.encrypt(json.dumps(asdict(pending)).encode()).decode()
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(query)}", sealed

    def pending(self, sealed: str | None, state: str) -> Pending | None:
        """The sign-in this browser started, when its cookie is ours, not expired, not finished, and
        names `state`; else None (a forged, stolen, expired or replayed callback)."""
        if not sealed or not state:
            return None
        try:
            pending = Pending(**json.loads(self._sealer.decrypt(sealed.encode(), ttl=PENDING_SECONDS)))
        except (BadSeal, ValueError, TypeError):
            return None
        if not secrets.compare_digest(pending.state, state) or pending.state in self._finished:
            return None
        return pending

    def _finish_once(self, state: str) -> None:
        now = time.monotonic()
        while self._finished and (next(iter(self._finished.values())) < now or len(self._finished) >= MAX_FINISHED):
            self._finished.popitem(last=False)
        self._finished[state] = now + PENDING_SECONDS

    async def finish(self, pending: Pending, code: str) -> tuple[SignedIn, str]:
        """(the signed-in identity, the path to go next); InvalidToken says why a sign-in failed. The
        state is spent first: a replay of this callback is refused."""
        self._finish_once(pending.state)
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
        auth = httpx.BasicAuth(self.client_id, self.client_secret) if self.client_secret else None
        try:
            response = await self.oauth.client.post(endpoint, data=form, auth=auth or httpx.USE_CLIENT_DEFAULT)
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
