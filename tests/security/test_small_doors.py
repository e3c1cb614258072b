"""The small doors: the HTTP auth gate fails closed when its first check fails, the owner's names
cannot be taken by a token, the audit log keeps no secret (nested or short), resource reads are
rate-limited like tool calls, and a service called outside any scope refuses instead of reading all."""

from __future__ import annotations

import contextvars
import hashlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from mcp.shared.exceptions import MCPError

from services.access.scope import Scope, use_scope
from tests.access.test_access_http import HEADERS, INIT
from tests.e2e.test_e2e import free_port, server_env
from tests.security.support import (
    World,
    audit_rows,
    bearer_transport,
    build_world,
    http_server,
)
from tests.support.cli_process import run_in_process
from tests.support.mcp_helpers import call, client_in_own_task


@pytest_asyncio.fixture(scope="module")
async def world(app: Any) -> World:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        return await build_world(app, rate=4)


@pytest_asyncio.fixture(scope="module")
async def url(world: World, database_url: str, files_dir: Path) -> AsyncIterator[str]:
    async with http_server(database_url, files_dir) as served:
        yield served


async def test_auth_gate_fails_closed_when_its_first_check_fails(files_dir: Path) -> None:
    """Loopback, and the token database unreachable from the start: no request gets in unauthenticated."""
    dead = f"postgresql://archivist:pw@127.0.0.1:{free_port()}/gone"
    async with http_server(dead, files_dir) as served:
        async with httpx.AsyncClient() as http:
            answer = await http.post(served, json=INIT, headers=HEADERS, timeout=30)
    assert answer.status_code == 401, answer.text[:300]


@pytest.mark.parametrize("name", ["stdio", "local", "owner", "LOCAL", " stdio "])
def test_owner_names_are_refused_for_tokens(name: str, database_url: str, files_dir: Path) -> None:
    # in this process (cli.main, tests/support/cli_process.py): five commands cost five Python starts
    # otherwise; test_access_dynamic runs `token create` as a real process
    made = run_in_process(["token", "create", "--name", name], server_env(database_url, files_dir))
    assert made.returncode != 0 and "reserved" in made.stderr, (made.returncode, made.stdout, made.stderr)


async def test_a_token_named_like_the_owner_before_the_rule_is_refused(app: Any, url: str) -> None:
    """A token row named 'local' (made before names were reserved) no longer authenticates."""
    await app.db.pool.execute(
        "INSERT INTO access_tokens (name, token_hash, prefix, profiles) VALUES ('local', $1, 'arch_old', '{}') "
        "ON CONFLICT (name) DO UPDATE SET token_hash = EXCLUDED.token_hash, revoked_at = NULL, expires_at = NULL",
        hashlib.sha256(b"arch_oldlocalsecret").hexdigest(),
    )
    async with httpx.AsyncClient() as http:
        headers = {**HEADERS, "Authorization": "Bearer arch_oldlocalsecret"}
        assert (await http.post(url, json=INIT, headers=headers)).status_code == 401


async def test_audit_log_redacts_nested_and_short_secrets(app: Any, url: str, world: World) -> None:
    secrets = ["hunter2", "k3y", "s3cr3tpw", "abc", "arch_leakedleakedleaked"]
    metadata = {
        "auth": {"password": "hunter2", "api_key": "k3y", "layers": [{"Authorization": "Bearer abc"}]},
        "dsn": "postgresql://svc:s3cr3tpw@db.internal/prod",
        "note": "token=arch_leakedleakedleaked",
    }
    async with client_in_own_task(bearer_transport(url, world.pub_secret)) as client:
        await call(client, "manage_document", action="create", content="Short note.", title="N", metadata=metadata)
    rows = await audit_rows(app, "pub-reader", 1, "manage_document")
    stored = json.dumps(
        [json.loads(r["arguments"]) if isinstance(r["arguments"], str) else r["arguments"] for r in rows]
    )
    assert rows and "[redacted]" in stored, stored
    assert not [s for s in secrets if s in stored], stored


async def test_resource_reads_are_rate_limited_per_token(app: Any, url: str, world: World) -> None:
    """The token's bucket (4 per minute here) covers resource reads as well as tool calls."""
    await app.db.pool.execute("DELETE FROM rate_buckets")
    refused: list[str] = []
    async with client_in_own_task(bearer_transport(url, world.pub_secret)) as client:
        for _ in range(6):
            try:
                await client.read_resource(f"archivist://documents/{world.pub_document}")
            except MCPError as exc:
                refused.append(exc.error.message)
    assert refused and "Rate limit" in refused[0], refused
    rows = await audit_rows(app, "pub-reader", 6, "resources/read")
    assert sum(1 for r in rows if r["error_code"] == "RATE_LIMITED") >= 1


def test_no_scope_entered_means_no_access() -> None:
    """A service reached outside any entry point's scope refuses (fails closed) instead of reading all."""
    from services.access import scope as scoping

    def outside() -> Any:
        return scoping.current_scope()

    with pytest.raises(Exception) as refused:
        contextvars.Context().run(outside)
    assert "scope" in str(refused.value).lower()


async def test_a_refused_profile_names_no_other_profiles(app: Any, url: str, world: World) -> None:
    """A token whose profile was disabled is refused without learning the other tenants' profile names."""
    await app.profiles.create("gone", "soon disabled", [world.pub_source])
    _, secret = await app.tokens.create("gone-reader", ["gone"])
    await app.profiles.update("gone", enabled=False)
    async with client_in_own_task(bearer_transport(url, secret)) as client:
        refused = await call(client, "manage_source", action="list")
    assert not refused["success"] and refused["error_code"] == "NOT_FOUND", refused
    text = json.dumps(refused)
    assert not re.search(r"\b(sec|pub)\b", text), text
