"""Access tokens from the team's own identity provider (OAuth 2.1 resource server, issue 20).

With `ARCHIVIST_OAUTH_ISSUER` set, a bearer token that is not one of Archivist's own (`arch_...`) is
checked here, locally:

- a JWT: its signature by a key of the issuer's JWKS (discovered from the issuer's metadata, cached,
  fetched again on an unknown `kid` at most once per `jwks_min_refresh_seconds`, and when the cache
  is older than `jwks_cache_seconds`: a rotated key works without a restart, and a removed one stops
  working within the cache time), then `iss`, `aud` and `exp`/`nbf` (with `leeway` seconds of clock
  skew);
- anything else: RFC 7662 introspection, when the issuer's metadata names an introspection endpoint;
  the answer must name this resource in `aud`, as a JWT must; an admitted token's answer is reused
  for up to `introspection_cache_seconds`, never past its `exp` (services/access/token_cache.py).

The required scopes are not checked here: a valid token without them is still a valid token, and the
HTTP layer (the SDK's RequireAuthMiddleware, access/http_auth.py) answers it 403 `insufficient_scope`
(RFC 6750 section 3.1), where a refused token gets 401.

The result is an `Identity` (subject, email, client id, groups, scopes): who the person or agent is,
never what it may see; `services/access/grants.py` maps it onto profiles. Signatures are checked by
PyJWT; nothing here does cryptography of its own. No mcp/starlette imports (the SDK glue is
access/http_auth.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt

from services.access.redaction import redact_text
from services.access.token_cache import TokenCache
from services.core.settings import Settings

logger = logging.getLogger(__name__)
#: the scope that lets a token write (create, update, delete, crawl); without it access is read-only
WRITE_SCOPE = "archivist:write"
#: asymmetric signatures only: a shared-secret (HS*) or unsigned token is never accepted
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
WELL_KNOWN = ("/.well-known/openid-configuration", "/.well-known/oauth-authorization-server")


class InvalidToken(Exception):
    """The token is not acceptable; the message says why (for the log, never for the caller)."""


@dataclass(frozen=True)
class OAuthConfig:
    """What a token must satisfy (from settings; see docs/identity.md)."""

    issuer: str
    audience: str
    required_scopes: tuple[str, ...] = ()
    groups_claim: str = "groups"
    client_id: str | None = None  # for introspection (RFC 7662 client authentication)
    client_secret: str | None = field(default=None, repr=False)
    leeway_seconds: float = 60.0
    jwks_cache_seconds: float = 300.0
    jwks_min_refresh_seconds: float = 10.0
    introspection_cache_seconds: float = 60.0
    timeout_seconds: float = 10.0

    @classmethod
    def from_settings(cls, settings: Settings, default_audience: str) -> OAuthConfig | None:
        issuer = (getattr(settings, "oauth_issuer", None) or "").strip()
        if not issuer:
            return None
        scopes = getattr(settings, "oauth_required_scopes", None) or []
        if isinstance(scopes, str):
            scopes = scopes.replace(",", " ").split()
        return cls(
            issuer=issuer,  # compared exactly, as the issuer's metadata spells it
            audience=(getattr(settings, "oauth_audience", None) or default_audience).strip(),
            required_scopes=tuple(scopes),
            groups_claim=getattr(settings, "oauth_groups_claim", None) or "groups",
            client_id=getattr(settings, "oauth_client_id", None) or None,
            client_secret=getattr(settings, "oauth_client_secret", None) or None,
            leeway_seconds=float(getattr(settings, "oauth_leeway_seconds", 60.0)),
            jwks_cache_seconds=float(getattr(settings, "oauth_jwks_cache_seconds", 300.0)),
            jwks_min_refresh_seconds=float(getattr(settings, "oauth_jwks_min_refresh_seconds", 10.0)),
            introspection_cache_seconds=float(getattr(settings, "oauth_introspection_cache_seconds", 60.0)),
        )


@dataclass(frozen=True)
class Identity:
    """Who a verified token names: the person (subject, email) or the agent (client id).

    Only claims the issuer vouches for name the caller: `sub` (unique per issuer), an email the token
    marks `email_verified: true`, or the client id. A display name (`preferred_username`, `name`,
    `upn`) is never read: a person may often choose it, so mallory could call herself alice."""

    issuer: str
    subject: str | None = None
    email: str | None = None
    #: the email, only when the token says `email_verified: true` (a JSON boolean): only this one
    #: matches `--email-domain` grants and names the caller
    verified_email: str | None = None
    client_id: str | None = None
    groups: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()
    expires_at: int | None = None

    @property
    def label(self) -> str:
        """The audit log's `who`: `oidc:` and the verified email, else the subject, else the client id."""
        return "oidc:" + (self.verified_email or self.subject or self.client_id or "")

    @property
    def bucket(self) -> str:
        """The rate bucket: the issuer and the subject (else the verified email, else the client id)."""
        if self.subject:
            return f"oidc:{self.issuer} sub:{self.subject}"
        if self.verified_email:
            return f"oidc:{self.issuer} email:{self.verified_email}"
        return f"oidc:{self.issuer} client:{self.client_id}"

    @property
    def may_write(self) -> bool:
        return WRITE_SCOPE in self.scopes

    def describe(self) -> str:
        """The claims that grants match, for a refusal that says why (no token content)."""
        parts = [f"subject {self.subject!r}" if self.subject else None]
        if self.email:
            parts.append(f"email {self.email!r}" + ("" if self.verified_email else " (not verified)"))
        parts.append(f"groups {', '.join(self.groups)}" if self.groups else "no groups")
        return "; ".join(p for p in parts if p)


def identity_from_claims(claims: dict[str, Any], config: OAuthConfig) -> Identity:
    """The one reading of a verified token's (or ID token's) claims. An email counts as verified only
    with `email_verified: true` (missing, `"true"` or `"false"` do not); a token naming no subject,
    verified email or client id is refused."""
    email = claims.get("email") if isinstance(claims.get("email"), str) and claims.get("email") else None
    client = next((claims[k] for k in ("client_id", "azp", "appid", "cid") if isinstance(claims.get(k), str)), None)
    subject = claims.get("sub")
    exp = claims.get("exp")
    identity = Identity(
        issuer=str(claims.get("iss") or config.issuer),
        subject=str(subject) if isinstance(subject, str | int) and str(subject) else None,
        email=email,
        verified_email=email if email and claims.get("email_verified") is True else None,
        client_id=client or None,
        groups=tuple(as_strings(claim_at(claims, config.groups_claim))),
        scopes=tuple(scopes_of(claims)),
        expires_at=int(exp) if isinstance(exp, int | float) else None,
    )
    if not (identity.subject or identity.verified_email or identity.client_id):
        raise InvalidToken("the token names no subject, verified email or client id")
    return identity


def claim_at(claims: dict[str, Any], path: str) -> Any:
    """A claim by name, or by a dotted path into nested objects (Keycloak's `realm_access.roles`)."""
    if path in claims:
        return claims[path]
    value: Any = claims
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def as_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list | tuple):
        return [str(v) for v in value if isinstance(v, str | int)]
    return []


def scopes_of(claims: dict[str, Any]) -> list[str]:
    """`scope` (RFC 9068/8693: space-separated) or `scp` (Okta, Entra: a list or a string)."""
    return as_strings(claims.get("scope")) + as_strings(claims.get("scp"))


class IssuerKeys:
    """The issuer's metadata and signing keys, cached; fetched again on an unknown `kid` (rate-limited)."""

    def __init__(self, config: OAuthConfig, client: httpx.AsyncClient) -> None:
        self.config = config
        self.client = client
        self._metadata: dict[str, Any] | None = None
        self._keys: dict[str | None, dict[str, Any]] = {}
        self._fetched_at = float("-inf")  # the last successful fetch
        self._attempted_at = float("-inf")  # the last fetch tried (successful or not)
        self._lock = asyncio.Lock()

    async def metadata(self) -> dict[str, Any]:
        """The issuer's metadata, discovered once (a failed discovery is tried again on a later call)."""
        if self._metadata is None:
            self._metadata = await self._discover()
        return self._metadata

    async def _discover(self) -> dict[str, Any]:
        parts = urlsplit(self.config.issuer)
        base = f"{parts.scheme}://{parts.netloc}"
        path = parts.path.rstrip("/")
        # OpenID Connect appends the well-known path; RFC 8414 inserts it before the issuer's path
        candidates = [self.config.issuer.rstrip("/") + WELL_KNOWN[0], base + WELL_KNOWN[1] + path]
        for url in candidates:
            try:
                response = await self.client.get(url)
            except httpx.HTTPError as exc:
                logger.warning("issuer metadata at %s unreachable: %s", url, exc)
                continue
            if response.status_code != 200:
                continue
            metadata = response.json()
            if metadata.get("issuer") != self.config.issuer:
                raise InvalidToken(f"the metadata at {url} names issuer {metadata.get('issuer')!r}")
            return dict(metadata)
        raise InvalidToken(f"no OAuth/OpenID metadata found for issuer {self.config.issuer}")

    async def key(self, kid: str | None) -> dict[str, Any]:
        """The JWK for `kid`: from the cache while it is fresh, else from the issuer's JWKS. Fetches
        are at least `jwks_min_refresh_seconds` apart, so unknown `kid`s cannot make Archivist hammer
        the issuer; while the issuer is unreachable the last keys it published stay in use."""
        now = time.monotonic()
        fresh = now - self._fetched_at < self.config.jwks_cache_seconds
        if fresh and (kid in self._keys or (kid is None and len(self._keys) == 1)):
            return self._lookup(kid)
        async with self._lock:
            now = time.monotonic()
            stale = now - self._fetched_at >= self.config.jwks_cache_seconds
            if (stale or kid not in self._keys) and now - self._attempted_at >= self.config.jwks_min_refresh_seconds:
                self._attempted_at = now
                try:
                    await self._fetch()
                except InvalidToken as exc:
                    if not self._keys:
                        raise
                    logger.warning("keeping the issuer's last published keys: %s", exc)
        return self._lookup(kid)

    def _lookup(self, kid: str | None) -> dict[str, Any]:
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        if kid not in self._keys:
            raise InvalidToken(f"the issuer publishes no key {kid!r}")
        return self._keys[kid]

    async def _fetch(self) -> None:
        uri = (await self.metadata()).get("jwks_uri")
        if not uri:
            raise InvalidToken("the issuer's metadata has no jwks_uri")
        try:
            response = await self.client.get(uri)
            response.raise_for_status()
            keys = response.json().get("keys") or []
        except (httpx.HTTPError, ValueError) as exc:
            raise InvalidToken(f"the issuer's keys could not be fetched: {exc}") from None
        usable = [k for k in keys if isinstance(k, dict) and k.get("use", "sig") == "sig" and k.get("kty") != "oct"]
        self._keys = {k.get("kid"): k for k in usable}
        self._fetched_at = time.monotonic()


class OAuthVerifier:
    """Turns the issuer's access tokens into an `Identity` (its scopes included, whatever they are), or
    raises InvalidToken saying why."""

    def __init__(self, config: OAuthConfig, client: httpx.AsyncClient | None = None) -> None:
        self.config = config
        self.client = client or httpx.AsyncClient(timeout=config.timeout_seconds, follow_redirects=False)
        self.keys = IssuerKeys(config, self.client)
        self.introspected: TokenCache[Identity] = TokenCache(config.introspection_cache_seconds)

    async def verify(self, token: str) -> Identity:
        try:
            identity = await (self._jwt(token) if is_jwt(token) else self._introspect(token))
        except InvalidToken as exc:
            raise InvalidToken(redact_text(str(exc))) from None
        return identity

    async def _jwt(self, token: str) -> Identity:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"malformed JWT: {exc}") from None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise InvalidToken(f"signature algorithm {alg!r} is not accepted")
        try:
            key = jwt.PyJWK(await self.keys.key(header.get("kid")), algorithm=alg)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=self.config.audience,
                issuer=self.config.issuer,
                leeway=self.config.leeway_seconds,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"JWT refused: {exc}") from None
        return identity_from_claims(claims, self.config)

    async def _introspect(self, token: str) -> Identity:
        cached = self.introspected.get(token)
        if cached is not None:
            return cached
        endpoint = (await self.keys.metadata()).get("introspection_endpoint")
        if not endpoint:
            raise InvalidToken("not a JWT, and the issuer offers no introspection endpoint")
        config = self.config
        auth = httpx.BasicAuth(config.client_id, config.client_secret or "") if config.client_id else None
        form = {"token": token, "token_type_hint": "access_token"}
        try:
            response = await self.client.post(endpoint, data=form, auth=auth or httpx.USE_CLIENT_DEFAULT)
            response.raise_for_status()
            claims = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise InvalidToken(f"introspection failed: {exc}") from None
        if not isinstance(claims, dict) or claims.get("active") is not True:
            raise InvalidToken("the issuer says the token is not active")
        check_introspected(claims, self.config)
        identity = identity_from_claims(claims, self.config)
        self.introspected.put(token, identity, identity.expires_at)
        return identity

    async def aclose(self) -> None:
        await self.client.aclose()


def check_introspected(claims: dict[str, Any], config: OAuthConfig) -> None:
    """RFC 7662 answers carry the same claims a JWT would: `aud` must name this resource, as in a JWT
    (an answer without one may be for any API of the issuer); `iss`, `exp` and `nbf` are checked when
    present."""
    now = time.time()
    if claims.get("iss") is not None and claims["iss"] != config.issuer:
        raise InvalidToken(f"issued by {claims['iss']!r}")
    if config.audience not in audiences(claims.get("aud")):
        raise InvalidToken("issued for another audience (or for none)")
    exp = claims.get("exp")
    if isinstance(exp, int | float) and exp + config.leeway_seconds < now:
        raise InvalidToken("expired")
    nbf = claims.get("nbf")
    if isinstance(nbf, int | float) and nbf - config.leeway_seconds > now:
        raise InvalidToken("not valid yet")


def audiences(value: Any) -> list[str]:
    """`aud` as RFC 7519 spells it: one string (compared whole) or a list of strings."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def is_jwt(token: str) -> bool:
    parts = token.split(".")
    return len(parts) == 3 and all(parts[:2])
