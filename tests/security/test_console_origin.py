"""The console is locked to its own origin (issue 23, point 2), attacked through a real server: a
DNS-rebinding page (Host and Origin both the attacker's), the "Connect a client" dialog's secrets, and
oversized or file-carrying form bodies (point 3). The server is the default install: loopback, no token."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.security.helpers import ATTACKER, csrf_pair, http_server, server_env
from tests.support.web_helpers import CHROMIUM, CHROMIUM_ARGS, chromium

DB_PASSWORD = "Sup3r-s3cret-pw"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.fixture(scope="module")
def base(database_url: str, files_dir: Path) -> Iterator[str]:
    # the embedded server trusts local connections: a password in DATABASE_URL is carried but unused
    with_password = database_url.replace("postgres:@", f"postgres:{DB_PASSWORD}@", 1)
    assert DB_PASSWORD in with_password
    with http_server(server_env(with_password, files_dir)) as url:
        yield url


def attacker_headers(port_of: str) -> dict[str, str]:
    return {
        "Host": f"{ATTACKER}:{port_of.rsplit(':', 1)[1]}",
        "Origin": f"http://{ATTACKER}:{port_of.rsplit(':', 1)[1]}",
    }


def test_foreign_host_is_refused_on_every_path(base: str) -> None:
    host = {"Host": ATTACKER}
    for path in ("/", "/access", "/search?q=salaries", "/jobs", "/signin", "/healthz"):
        response = httpx.get(f"{base}{path}", headers=host, timeout=10)
        assert response.status_code in (400, 421), (path, response.status_code)
        assert "Connect a client" not in response.text
    mcp = httpx.post(
        f"{base}/mcp",
        json=INIT,
        headers={**host, "Accept": "application/json, text/event-stream", "Content-Type": "application/json"},
        timeout=10,
    )
    assert mcp.status_code in (400, 421)
    assert httpx.get(f"{base}/", timeout=10).status_code == 200  # the real name still answers


def test_dns_rebinding_post_is_refused(base: str) -> None:
    """The attacker's page, served from the attacker's name now resolving to 127.0.0.1, reads a CSRF
    pair from the console and posts a write with Origin = Host = the attacker."""
    forged = attacker_headers(base)
    cookie, field = csrf_pair(base, "/add")
    response = httpx.post(
        f"{base}/add/text",
        data={"csrf": field, "new_source": "Rebound", "title": "pwned", "content": "written by a rebinding page"},
        headers={**forged, "Cookie": f"archivist_csrf={cookie}"},
        timeout=10,
    )
    assert response.status_code in (400, 403, 421), response.status_code
    assert "Rebound" not in httpx.get(f"{base}/", timeout=10).text
    token = httpx.post(
        f"{base}/access/tokens",
        data={"csrf": field, "name": "rebound"},
        headers={**forged, "Cookie": f"archivist_csrf={cookie}"},
        timeout=10,
    )
    assert token.status_code in (400, 403, 421)
    assert "arch_" not in token.text


def test_rebinding_in_a_real_browser(base: str) -> None:
    """Chromium resolves the attacker's name to this machine, as a rebinding DNS server would make it:
    the page it loads under the attacker's origin must not be the console."""
    from playwright.sync_api import sync_playwright

    port = base.rsplit(":", 1)[1]
    rules = f"--host-resolver-rules=MAP {ATTACKER} 127.0.0.1"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[*CHROMIUM_ARGS, rules])
        try:
            page = browser.new_page()
            for path in ("/", "/access", "/search?q=x"):
                response = page.goto(f"http://{ATTACKER}:{port}{path}")
                assert response is not None and response.status in (400, 421), (path, response and response.status)
                assert "Connect a client" not in page.content()
            status = page.evaluate("fetch('/healthz').then(r => r.status)")
            assert status in (400, 421)
        finally:
            browser.close()


def test_connect_dialog_shows_no_database_password(base: str) -> None:
    with chromium() as browser:
        page = browser.new_page()
        page.goto(f"{base}/access")
        page.click("#open-connect")
        text = page.locator("#connect-dialog").inner_text()
        assert "DATABASE_URL" in text  # the stdio entry is there (open loopback console) ...
        assert DB_PASSWORD not in text  # ... without the password
        assert DB_PASSWORD not in page.content()


def chunks(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    yield b"next=%2F&token="
    sent = 0
    while sent < total:
        yield b"a" * size
        sent += size


def test_chunked_40mb_signin_is_cut_at_the_limit(base: str) -> None:
    started = time.monotonic()
    response = httpx.post(
        f"{base}/signin",
        content=chunks(40 * 1024 * 1024),  # a generator: no Content-Length, Transfer-Encoding: chunked
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        timeout=30,
    )
    elapsed = time.monotonic() - started
    assert response.status_code == 413, response.status_code
    assert elapsed < 5, f"took {elapsed:.1f} s: the body was read"
    assert httpx.get(f"{base}/signin", timeout=10).status_code == 200  # the server still answers


def test_chunked_body_over_a_small_form_is_refused(base: str) -> None:
    cookie, field = csrf_pair(base, "/add")

    def body() -> Iterator[bytes]:
        yield f"csrf={field}&new_source=Big&content=".encode()
        yield from (b"b" * 65536 for _ in range(8))  # 512 KB to the crawl form, which takes a few KB

    response = httpx.post(
        f"{base}/add/crawl",
        content=body(),
        headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"archivist_csrf={cookie}"},
        timeout=30,
    )
    assert response.status_code == 413, response.status_code


def test_file_part_on_a_non_upload_form_is_refused(base: str) -> None:
    cookie, field = csrf_pair(base, "/add")
    response = httpx.post(
        f"{base}/add/text",
        data={"csrf": field, "new_source": "Smuggled", "title": "t", "content": "text"},
        files={"extra": ("payload.bin", b"\x00" * 1024, "application/octet-stream")},
        headers={"Cookie": f"archivist_csrf={cookie}"},
        timeout=10,
    )
    assert response.status_code in (400, 413, 415), response.status_code
    assert "Smuggled" not in httpx.get(f"{base}/", timeout=10).text


def test_upload_form_takes_one_file_only(base: str) -> None:
    cookie, field = csrf_pair(base, "/add")
    response = httpx.post(
        f"{base}/add/file",
        data={"csrf": field, "new_source": "Two files"},
        files=[("file", ("a.md", b"# A\n\none", "text/markdown")), ("file", ("b.md", b"# B\n\ntwo", "text/markdown"))],
        headers={"Cookie": f"archivist_csrf={cookie}"},
        timeout=10,
    )
    assert response.status_code in (400, 413), response.status_code
