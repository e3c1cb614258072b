"""A real OAuth 2.1 / OpenID Connect provider on 127.0.0.1 for the identity tests, built from Authlib's
authorization server (grants, PKCE, RFC 7662 introspection) and joserfc's keys and JWTs.

It publishes OpenID discovery and RFC 8414 metadata, a JWKS, an authorization endpoint that signs in a
chosen user without a form, a token endpoint (authorization code + PKCE for public clients, client
credentials for agents) issuing RFC 9068 JWT access tokens for the requested `resource` (RFC 8707),
or opaque ones for clients marked so, and an introspection endpoint. Keys rotate on demand.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import flask
import httpx
import werkzeug.serving
from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, grants
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc7662 import IntrospectionEndpoint
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")  # plain http on loopback, in tests only
logging.getLogger("werkzeug").setLevel(logging.WARNING)


@dataclass
class Client(ClientMixin):
    client_id: str
    client_secret: str | None = None  # None: a public client (PKCE, no secret)
    redirect_uris: list[str] = field(default_factory=list)
    claims: dict[str, Any] = field(default_factory=dict)  # a service account's own claims
    opaque: bool = False  # opaque access tokens (checked by introspection)

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        return self.redirect_uris[0] if self.redirect_uris else None

    def get_allowed_scope(self, scope: str) -> str:
        return scope or ""

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return self.client_secret is not None and secrets.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        if self.client_secret is None:
            return method == "none"
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        if self.client_secret is None:
            return grant_type == "authorization_code"
        return grant_type in ("client_credentials", "authorization_code")


@dataclass
class Code:
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: str
    code_challenge: str | None
    code_challenge_method: str | None
    resource: str | None
    nonce: str | None = None

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


class Opaque(dict[str, Any]):
    """An opaque token's claims, as Authlib's introspection endpoint reads a token."""

    def is_expired(self) -> bool:
        return bool(self["exp"] <= time.time())

    def is_revoked(self) -> bool:
        return False


class IdP:
    """The provider's state: users, clients, keys (the first signs), codes and opaque tokens."""

    def __init__(self, users: dict[str, dict[str, Any]] | None = None) -> None:
        self.users = users or {}
        self.clients: dict[str, Client] = {}
        self.keys: list[RSAKey] = [new_key()]
        self.codes: dict[str, Code] = {}
        self.opaque: dict[str, dict[str, Any]] = {}
        self.introspected: list[str] = []  # the token of every introspection request, in order
        self.sign_in_as = ""  # the user the authorization endpoint signs in
        self.port = 0
        self.audience_default = ""
        self.app = build_app(self)

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def rotate(self, keep_old: bool = True) -> None:
        """A new signing key; the old one stays published (a rollover) or is removed (a revocation)."""
        self.keys = [new_key(), *(self.keys if keep_old else [])]

    def claims_for(self, client: Client, user: str | None, scope: str, resource: str | None) -> dict[str, Any]:
        now = int(time.time())
        subject = {"sub": user, **self.users.get(user, {})} if user else {"sub": client.client_id, **client.claims}
        return {
            "iss": self.issuer,
            "aud": resource or self.audience_default or client.client_id,
            "iat": now,
            "exp": now + 3600,
            "jti": secrets.token_hex(8),
            "client_id": client.client_id,
            "scope": scope,
            **subject,
        }

    def sign(self, claims: dict[str, Any], key: RSAKey | None = None) -> str:
        """A JWT signed as this provider signs (or with `key`, e.g. one it never published)."""
        key = key or self.keys[0]
        return jwt.encode({"alg": "RS256", "kid": key.kid, "typ": "at+jwt"}, claims, key)

    def mint(self, user: str, resource: str, scope: str = "", **overrides: Any) -> str:
        """An access token as the token endpoint would issue it for `user`, with claims overridden
        (e.g. an `exp` in the past): for the refusals that no honest grant produces."""
        client = Client("minted", "x")
        claims = {**self.claims_for(client, user, scope, resource), **overrides}
        return self.sign({k: v for k, v in claims.items() if v is not None})

    def client_token(self, client_id: str, resource: str, scope: str = "") -> str:
        """A real client-credentials grant at the token endpoint."""
        client = self.clients[client_id]
        response = httpx.post(
            f"{self.issuer}/token",
            data={"grant_type": "client_credentials", "scope": scope, "resource": resource},
            auth=(client.client_id, client.client_secret or ""),
        )
        response.raise_for_status()
        return str(response.json()["access_token"])


def new_key() -> RSAKey:
    key = RSAKey.generate_key(2048, private=True)
    key.ensure_kid()
    return key


def build_app(idp: IdP) -> flask.Flask:
    app = flask.Flask("archivist-test-idp")
    server = AuthorizationServer(app, query_client=idp.clients.get, save_token=lambda token, request: None)

    def generate(grant_type: str, client: Client, user: Any = None, scope: Any = None, **_: Any) -> dict[str, Any]:
        resource = flask.request.form.get("resource") or getattr(flask.g, "code_resource", None)
        claims = idp.claims_for(client, user, scope or "", resource)
        if client.opaque:
            token = secrets.token_urlsafe(32)
            idp.opaque[token] = claims
        else:
            token = idp.sign(claims)
        answer = {"token_type": "Bearer", "access_token": token, "expires_in": 3600, "scope": scope or ""}
        if grant_type == "authorization_code" and "openid" in (scope or "").split():
            answer["id_token"] = idp.sign(
                {**claims, "aud": client.client_id, "nonce": getattr(flask.g, "code_nonce", None)}
            )
        return answer

    class CodeGrant(grants.AuthorizationCodeGrant):
        TOKEN_ENDPOINT_AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post"]

        def save_authorization_code(self, code: str, request: Any) -> None:
            data = request.payload.data
            idp.codes[code] = Code(
                code,
                request.client.client_id,
                request.payload.redirect_uri,
                request.payload.scope or "",
                request.user,
                data.get("code_challenge"),
                data.get("code_challenge_method"),
                data.get("resource"),
                data.get("nonce"),
            )

        def query_authorization_code(self, code: str, client: Client) -> Code | None:
            found = idp.codes.get(code)
            return found if found and found.client_id == client.client_id else None

        def delete_authorization_code(self, authorization_code: Code) -> None:
            idp.codes.pop(authorization_code.code, None)

        def authenticate_user(self, authorization_code: Code) -> str:
            # read before the token is generated (the code is deleted only after)
            flask.g.code_resource = authorization_code.resource
            flask.g.code_nonce = authorization_code.nonce
            return authorization_code.user

    class Introspection(IntrospectionEndpoint):
        def query_token(self, token_string: str, token_type_hint: str | None) -> Opaque | None:
            claims = idp.opaque.get(token_string)
            return Opaque(claims) if claims else None

        def introspect_token(self, token: Opaque) -> dict[str, Any]:
            return {"active": True, **token}

        def check_permission(self, token: Any, client: Client, request: Any) -> bool:
            return client.client_secret is not None

    server.register_token_generator("default", generate)
    server.register_grant(CodeGrant, [CodeChallenge(required=True)])
    server.register_grant(grants.ClientCredentialsGrant)
    server.register_endpoint(Introspection)

    def metadata() -> flask.Response:
        base = idp.issuer
        return flask.jsonify(
            issuer=base,
            authorization_endpoint=f"{base}/authorize",
            token_endpoint=f"{base}/token",
            introspection_endpoint=f"{base}/introspect",
            jwks_uri=f"{base}/jwks",
            response_types_supported=["code"],
            grant_types_supported=["authorization_code", "client_credentials"],
            code_challenge_methods_supported=["S256"],
            token_endpoint_auth_methods_supported=["none", "client_secret_basic", "client_secret_post"],
            scopes_supported=["openid", "email", "archivist", "archivist:write"],
            subject_types_supported=["public"],
            id_token_signing_alg_values_supported=["RS256"],
        )

    app.add_url_rule("/.well-known/openid-configuration", "oidc", metadata)
    app.add_url_rule("/.well-known/oauth-authorization-server", "oauth", metadata)
    app.add_url_rule("/jwks", "jwks", lambda: flask.jsonify(KeySet(list(idp.keys)).as_dict(private=False)))
    app.add_url_rule("/authorize", "authorize", lambda: server.create_authorization_response(grant_user=idp.sign_in_as))
    app.add_url_rule("/token", "token", server.create_token_response, methods=["POST"])

    def introspect() -> Any:
        idp.introspected.append(flask.request.form.get("token", ""))
        return server.create_endpoint_response("introspection")

    app.add_url_rule("/introspect", "introspect", introspect, methods=["POST"])
    return app


@contextmanager
def running(idp: IdP) -> Iterator[IdP]:
    """Serve `idp` on a free loopback port in a thread for the block."""
    server = werkzeug.serving.make_server("127.0.0.1", 0, idp.app, threaded=True)
    idp.port = server.server_port
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield idp
    finally:
        server.shutdown()
        thread.join(5)
