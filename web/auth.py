"""Console access: sign-in with an access token (session cookie), CSRF checks, read-only refusal.

Sign-in is required unless the request is open: the one predicate of services/access/open_state.py that
/mcp asks too (loopback, not relayed by a proxy, no ALLOWED_HOSTS, sign-in or issuer setting, and either
ARCHIVIST_SINGLE_USER or no token ever existed here). The session cookie holds only a
random session id; the token secret stays in server memory and is verified again on every request, so
a revoked token signs its sessions out at once."""

from __future__ import annotations

import hmac
import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from starlette.requests import Request
from starlette.responses import Response

from services.access.hosts import HostPolicy, is_loopback

if TYPE_CHECKING:
    from services.access.tokens import TokenService
    from services.app import Archivist

SESSION_COOKIE = "archivist_session"
CSRF_COOKIE = "archivist_csrf"
CSRF_FIELD = "csrf"
#: console sessions one token (or one person of the identity provider) may hold at once
MAX_SESSIONS_PER_CALLER = 20
#: sign-ins one token may make per minute (its own bucket, beside its call rate)
SIGNINS_PER_MINUTE = 30
MAX_NEXT_CHARS = 2000


@dataclass
class Viewer:
    """Who is looking: `token` is the verified AccessToken (None when sign-in is not required)."""

    signed_in: bool = False
    token: Any = None
    sign_in_required: bool = False
    access_available: bool = False
    #: the computed scope is read-only (a read-only profile makes it so, not only the token's flag)
    scope_read_only: bool = False

    @property
    def name(self) -> str:
        return str(getattr(self.token, "name", "") or "")

    @property
    def read_only(self) -> bool:
        return self.scope_read_only or bool(getattr(self.token, "read_only", False))

    @property
    def can_write(self) -> bool:
        return not self.read_only


@dataclass
class Sessions:
    """Session id -> token secret (or an identity-provider sign-in, web/sso.py), in memory (a restart
    asks people to sign in again).

    A table no one can flood: each caller (a token, a person of the identity provider) keeps at most
    MAX_SESSIONS_PER_CALLER sessions, its own oldest leaving first, so no caller's sign-ins push out
    another's. It used to hold 1,000 sessions in all, oldest evicted: 1,000 sign-ins with any one token
    signed every person out. /signin is rate-limited per token besides (web/pages_access.py)."""

    secrets_by_id: dict[str, Any] = field(default_factory=dict)
    ids_by_caller: dict[str, OrderedDict[str, None]] = field(default_factory=dict)
    caller_by_id: dict[str, str] = field(default_factory=dict)

    def open(self, secret: Any, caller: str) -> str:
        """A new session of `caller` (the key of the token or person that signed in)."""
        mine = self.ids_by_caller.setdefault(caller, OrderedDict())
        while len(mine) >= MAX_SESSIONS_PER_CALLER:
            self.close(next(iter(mine)))
        sid = secrets.token_urlsafe(32)
        self.secrets_by_id[sid], self.caller_by_id[sid] = secret, caller
        mine[sid] = None
        return sid

    def secret(self, sid: str | None) -> Any:
        return self.secrets_by_id.get(sid) if sid else None

    def close(self, sid: str | None) -> None:
        if not sid or sid not in self.secrets_by_id:
            return
        del self.secrets_by_id[sid]
        caller = self.caller_by_id.pop(sid)
        mine = self.ids_by_caller.get(caller)
        if mine is not None:
            mine.pop(sid, None)
            if not mine:
                del self.ids_by_caller[caller]


def access_services(app: Archivist) -> TokenService | None:
    """The token service when the access-control feature is installed, else None."""
    return getattr(app, "tokens", None)


async def verify(app: Archivist, secret: str | None) -> Any:
    tokens = access_services(app)
    if tokens is None or not secret:
        return None
    return await tokens.verify(secret)


def secure_cookie(request: Request, secure_server: bool) -> bool:
    """Secure when the server is off loopback or serves TLS (its cookies then never travel in clear
    text; off loopback over plain HTTP, sign-in needs a TLS reverse proxy), and on https or a loopback
    name (browsers keep Secure cookies for http://localhost and 127.0.0.1)."""
    host = request.url.hostname
    return secure_server or request.url.scheme == "https" or not host or is_loopback(host)


def set_cookie(response: Response, name: str, value: str, *, secure: bool, max_age: int | None = None) -> None:
    response.set_cookie(name, value, max_age=max_age, httponly=True, samesite="strict", secure=secure, path="/")


def csrf_token(request: Request) -> str:
    """The request's CSRF token (double-submit: cookie + form field); a new one when none is set."""
    token = getattr(request.state, "csrf", None)
    if token is None:
        token = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)
        request.state.csrf = token
    return token


def remember_csrf(request: Request, response: Response, secure_server: bool) -> None:
    token = csrf_token(request)
    if request.cookies.get(CSRF_COOKIE) != token:
        set_cookie(response, CSRF_COOKIE, token, secure=secure_cookie(request, secure_server))


def same_origin(request: Request, hosts: HostPolicy) -> bool:
    """False when the browser says the request came from another origin (Sec-Fetch-Site), or its Origin
    names a host outside the server's allow-list: checked against that list, never against the Host
    header (a DNS-rebinding page sends its own name as both)."""
    if request.headers.get("sec-fetch-site") in ("cross-site", "same-site"):
        return False
    return hosts.allows_origin(request.headers.get("origin"), request.headers.get("host", ""), request.url.scheme)


def csrf_ok(request: Request, submitted: str | None, hosts: HostPolicy) -> bool:
    cookie = request.cookies.get(CSRF_COOKIE)
    if not cookie or not submitted or not same_origin(request, hosts):
        return False
    return hmac.compare_digest(cookie.encode(), submitted.encode())


def safe_next(raw: str | None) -> str:
    """Where to go after signing in: `raw` (its query string kept) when it is a path on this site,
    else "/". The one check for every sign-in (token form and identity provider).

    A browser takes `/<backslash>evil`, `/<tab>/evil` and `//evil` to another host (it reads a
    backslash as a slash and drops tabs and newlines), and a later hop may percent-decode `/%5Cevil`
    into one of them. So the path part must start with a single `/` and hold no backslash and no
    control character, as written and after each round of percent-decoding (at most 3; more is
    refused); the whole value holds no control character either."""
    if not raw or len(raw) > MAX_NEXT_CHARS or has_control(raw):
        return "/"
    cut = min((i for i in (raw.find("?"), raw.find("#")) if i >= 0), default=len(raw))
    path = raw[:cut]
    for _ in range(4):
        if not path.startswith("/") or path.startswith("//") or "\\" in path or has_control(path):
            return "/"
        decoded = unquote(path)
        if decoded == path:
            return raw
        path = decoded
    return "/"


def has_control(text: str) -> bool:
    return any(ord(c) < 0x20 or c == "\x7f" for c in text)
