"""Whoever may start a crawl chooses where it goes, so a token holder may only have variables the
operator listed in ARCHIVIST_SECRET_ENV sent to a site (crawl headers and cookies, git auth_env);
otherwise any server secret (AWS keys, ...) could be sent to a host the caller controls."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import pytest

from services.access.identity import Caller, scope_of
from services.access.scope import Scope, use_scope
from services.core.errors import PermissionDenied
from services.net.credentials import check_references
from services.sync.git.config import check_auth_env

TENANT = Scope.of_profiles(frozenset({uuid4()}), read_only=False, profiles=["pub"], who="alice")


def test_a_token_holder_cannot_send_an_unlisted_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-send")
    monkeypatch.delenv("ARCHIVIST_SECRET_ENV", raising=False)
    with use_scope(TENANT):
        with pytest.raises(PermissionDenied, match="ARCHIVIST_SECRET_ENV") as refused:
            check_references({"Authorization": "env:AWS_SECRET_ACCESS_KEY"}, None, None)
        assert "do-not-send" not in refused.value.message + refused.value.suggestion
        with pytest.raises(PermissionDenied):
            check_references(None, {"session": "env:AWS_SECRET_ACCESS_KEY"}, None)
        with pytest.raises(PermissionDenied):
            check_auth_env("AWS_SECRET_ACCESS_KEY")


def test_listed_variables_and_the_owner_may(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCS_TOKEN", "Bearer abc")
    monkeypatch.setenv("GITLAB_TOKEN", "glpat")
    monkeypatch.setenv("ARCHIVIST_SECRET_ENV", "DOCS_*, GITLAB_TOKEN")
    with use_scope(TENANT):
        headers, _, _ = check_references({"Authorization": "env:DOCS_TOKEN"}, None, None)
        assert headers == {"Authorization": "env:DOCS_TOKEN"}
        assert check_auth_env("GITLAB_TOKEN") == "GITLAB_TOKEN"
    monkeypatch.delenv("ARCHIVIST_SECRET_ENV")
    with use_scope(Scope.owner()):
        assert check_references({"Authorization": "env:DOCS_TOKEN"}, None, None)[0]


async def test_only_the_local_owner_is_the_local_owner(app: Any) -> None:
    """Said by the scope, not inferred from its reach: a token without profiles reaches every source
    but is not the owner; stdio and open loopback HTTP are; a `--profile` selection confines the owner."""
    await app.profiles.create("owner-test", "", [])
    stdio = await scope_of(app, Caller(transport="stdio"))
    loopback = await scope_of(app, Caller(transport="local", session="session:1"))
    token = await scope_of(app, Caller(token="roamer"))
    confined = await scope_of(app, Caller(transport="stdio", profiles=("owner-test",)))
    assert stdio.local_owner and loopback.local_owner
    assert token.source_ids is None and not token.local_owner and token.who == "roamer"
    assert not confined.local_owner
    with use_scope(token):
        with pytest.raises(PermissionDenied):
            check_references({"Authorization": "env:AWS_SECRET_ACCESS_KEY"}, None, None)
