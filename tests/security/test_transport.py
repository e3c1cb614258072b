"""Transport doors (issue 23, point 8): `serve --tls-cert/--tls-key` answers HTTPS with uvicorn's own
TLS, and a server off loopback sets its session cookie Secure and answers only to its allowed names."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.security.helpers import ATTACKER, http_server, self_signed, server_env, set_cookies


@pytest_asyncio.fixture(scope="module")
async def secret(app: Any) -> AsyncIterator[str]:
    _, value = await app.tokens.create("transport-admin", [])
    yield value


async def test_tls_serve_answers_https(secret: str, database_url: str, files_dir: Path, tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    trust = ssl.create_default_context(cafile=str(cert))
    env = server_env(database_url, files_dir)
    with http_server(env, "--tls-cert", str(cert), "--tls-key", str(key), scheme="https", verify=trust) as base:
        assert base.startswith("https://")
        page = httpx.get(f"{base}/signin", verify=trust, timeout=10)
        assert page.status_code == 200 and page.url.scheme == "https"
        assert "secure" in set_cookies(page)["archivist_csrf"].lower()
        health = httpx.get(f"{base}/healthz", verify=trust, headers={"Authorization": f"Bearer {secret}"}, timeout=10)
        assert health.json()["ok"] is True
        with pytest.raises(httpx.HTTPError):
            httpx.get(base.replace("https://", "http://") + "/healthz", timeout=5)


async def test_off_loopback_cookie_is_secure_and_names_are_allowed(
    secret: str, database_url: str, files_dir: Path
) -> None:
    env = server_env(database_url, files_dir, ARCHIVIST_ALLOWED_HOSTS="kb.test, kb2.test")
    with http_server(env, "--host", "0.0.0.0") as base:
        port = base.rsplit(":", 1)[1]
        page = httpx.get(f"{base}/signin", headers={"Host": f"kb.test:{port}"}, timeout=10)
        assert page.status_code == 200
        assert "secure" in set_cookies(page)["archivist_csrf"].lower()  # plain http, but off loopback
        assert httpx.get(f"{base}/signin", headers={"Host": "kb2.test"}, timeout=10).status_code == 200
        for host in (ATTACKER, f"{ATTACKER}:{port}", "kb.test.attacker.example", "0.0.0.0"):
            assert httpx.get(f"{base}/signin", headers={"Host": host}, timeout=10).status_code in (400, 421), host
