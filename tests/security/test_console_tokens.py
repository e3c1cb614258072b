"""Small doors of a server whose access is by token (issue 23, points 2 and 8): /healthz tells strangers
only ok / not ok, errors sent over HTTP name no server path, and console actions count against the
token's rate limit and land in the audit log like MCP calls."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import pytest_asyncio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.security.helpers import http_server, server_env, sign_in


@pytest_asyncio.fixture(scope="module")
async def served(app: Any, database_url: str, files_dir: Path) -> AsyncIterator[dict[str, str]]:
    _, admin = await app.tokens.create("sec-admin", [])
    _, slow = await app.tokens.create("sec-slow", [], False, None, 2)  # 2 calls per minute
    _, one_job = await app.tokens.create("sec-one-job", [], False, None, None, 1)  # 1 running job
    env = server_env(database_url, files_dir, ARCHIVIST_CRAWL_ALLOW_PRIVATE="true")
    with http_server(env) as base:  # no worker: crawls stay queued
        yield {"base": base, "admin": admin, "slow": slow, "one_job": one_job}


async def test_healthz_tells_strangers_only_ok(served: dict[str, str]) -> None:
    base = served["base"]
    async with httpx.AsyncClient() as http:
        anonymous = await http.get(f"{base}/healthz")
        assert anonymous.status_code == 200
        assert anonymous.json() == {"ok": True}
        wrong = await http.get(f"{base}/healthz", headers={"Authorization": "Bearer arch_not-a-token"})
        assert wrong.json() == {"ok": True}
        detailed = await http.get(f"{base}/healthz", headers={"Authorization": f"Bearer {served['admin']}"})
        assert detailed.json()["database"]["ok"] is True and "audit" in detailed.json()


async def test_errors_over_http_name_no_server_path(served: dict[str, str], files_dir: Path) -> None:
    """A token holder asks for a file outside the allowed paths: the refusal must not map the server's disk."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {served['admin']}"})
    async with Client(streamable_http_client(f"{served['base']}/mcp", http_client=http)) as client:
        result = await client.call_tool(
            "manage_document", {"action": "create", "title": "Probe", "file_path": "/etc/passwd"}
        )
    text = result.content[0].text
    payload = json.loads(text)
    assert payload["success"] is False and payload["error_code"] == "PERMISSION_DENIED", payload
    assert str(files_dir.resolve()) not in text and str(files_dir) not in text
    assert "/etc/passwd" not in text and "/tmp/" not in text


async def test_console_actions_are_rate_limited_and_audited(served: dict[str, str], app: Any) -> None:
    base = served["base"]
    cookie = sign_in(base, served["slow"])
    field = cookie.split("archivist_csrf=", 1)[1].split(";", 1)[0]  # double submit: the field is the cookie
    statuses = []
    async with httpx.AsyncClient() as http:
        for i in range(3):
            response = await http.post(
                f"{base}/add/text",
                data={"csrf": field, "new_source": f"Limited {i}", "content": f"note {i}"},
                headers={"Cookie": cookie},
            )
            statuses.append(response.status_code)
    assert statuses[:2] == [303, 303] and statuses[2] == 429, statuses
    rows: list[Any] = []
    for _ in range(50):  # the audit writer batches off the request path
        rows = await app.db.pool.fetch(
            "SELECT tool, action, error_code FROM audit_log WHERE who = 'sec-slow' ORDER BY at"
        )
        if len(rows) >= 3:
            break
        await asyncio.sleep(0.1)
    assert [(r["tool"], r["action"], r["error_code"]) for r in rows] == [
        ("console", "add_text", None),
        ("console", "add_text", None),
        ("console", "add_text", "RATE_LIMITED"),
    ]


@pytest.mark.usefixtures("owner")
async def test_read_only_profile_makes_the_console_read_only(served: dict[str, str], app: Any) -> None:
    """A token not flagged read-only, confined to a read-only profile: its scope is read-only, so the
    console shows no write form and refuses its writes (as MCP does)."""
    source = await app.sources.create(title="Frozen", source_type="api")
    await app.profiles.create("frozen", "read-only docs", [source.id], read_only=True)
    _, secret = await app.tokens.create("sec-frozen", ["frozen"])
    base = served["base"]
    cookie = sign_in(base, secret)
    field = cookie.split("archivist_csrf=", 1)[1].split(";", 1)[0]
    async with httpx.AsyncClient() as http:
        add_page = await http.get(f"{base}/add", headers={"Cookie": cookie})
        assert 'action="/add/text"' not in add_page.text
        response = await http.post(
            f"{base}/add/text",
            data={"csrf": field, "source_id": str(source.id), "title": "Thawed", "content": "written anyway"},
            headers={"Cookie": cookie},
        )
    assert response.status_code == 403, response.status_code
    listed = await app.db.pool.fetchval("SELECT count(*) FROM documents WHERE title = 'Thawed'")
    assert listed == 0


async def test_console_crawls_honour_the_tokens_job_limit(served: dict[str, str]) -> None:
    """A token allowed one running job starts a second crawl from the console: refused, retryable."""
    base = served["base"]
    statuses = []
    async with httpx.AsyncClient() as http:
        cookie = sign_in(base, served["one_job"])
        field = cookie.split("archivist_csrf=", 1)[1].split(";", 1)[0]
        for i in range(2):
            response = await http.post(
                f"{base}/add/crawl",
                data={"csrf": field, "url": f"http://127.0.0.1:9/{i}", "new_source": f"Crawl {i}", "max_pages": "1"},
                headers={"Cookie": cookie},
            )
            statuses.append(response.status_code)
    assert statuses == [303, 429], statuses
