"""Console access rules in a real browser: sign-in, tokens, read-only, "Connect a client"."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.web_helpers import chromium, console_server, screenshot

TIMEOUT = 10_000


def has_access_control() -> bool:
    """True once the access-control services (tokens, profiles, scope) are part of this build."""
    from importlib.util import find_spec

    return any(find_spec(name) is not None for name in ("services.access.tokens", "services.access.scope"))


needs_tokens = pytest.mark.skipif(not has_access_control(), reason="the access-token service is not in this build")


@pytest.fixture(scope="module")
def browser(database_url: str) -> Iterator[Any]:
    # depends on database_url so the async fixture is set up before Playwright's loop runs in this thread
    with chromium() as context:
        context.set_default_timeout(TIMEOUT)
        yield context


def test_sign_in_required_off_loopback(browser: Any, database_url: str, files_dir: Path) -> None:
    # ARCHIVIST_CONSOLE_REQUIRE_SIGN_IN gives a loopback server the rules of one served off loopback.
    with console_server(database_url, files_dir, ARCHIVIST_CONSOLE_REQUIRE_SIGN_IN="true") as base_url:
        page = browser.new_page()
        try:
            page.goto(f"{base_url}/search")
            expect(page).to_have_url(re.compile(r"/signin\?next=/search$"))
            screenshot(page, "signin")
            page.fill("#token-input", "not-a-real-token")
            page.click("#signin-button")
            expect(page.locator(".error")).to_contain_text("not valid")
            page.goto(f"{base_url}/")
            expect(page).to_have_url(re.compile(r"/signin"))
            csrf = page.locator("input[name=csrf]").first.get_attribute("value")
            # a write without a session is refused, even with a valid CSRF pair
            refused = page.request.post(f"{base_url}/add/text", form={"csrf": csrf, "new_source": "x", "content": "y"})
            assert refused.status == 401
            assert httpx.get(f"{base_url}/jobs", follow_redirects=False).status_code == 303
        finally:
            page.close()


@pytest.fixture(scope="module")
def base_url(database_url: str, files_dir: Path) -> Iterator[str]:
    with console_server(database_url, files_dir) as url:
        yield url


def create_token(page: Any, base_url: str, name: str, *, read_only: bool, profile: str | None = None) -> str:
    page.goto(f"{base_url}/access")
    page.fill("#token-name", name)
    if profile:
        page.select_option("#token-profiles", profile)
    if read_only:
        page.check("#token-read-only")
    page.click("#create-token")
    secret = page.locator("#new-secret").inner_text().strip()
    assert len(secret) >= 16
    return secret


def sign_in(page: Any, base_url: str, secret: str) -> None:
    page.goto(f"{base_url}/signin")
    page.fill("#token-input", secret)
    page.click("#signin-button")
    expect(page).to_have_url(f"{base_url}/")


@needs_tokens
def test_profiles_tokens_connect_and_read_only(browser: Any, base_url: str) -> None:
    browser.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url)
    page = browser.new_page()
    try:
        page.goto(f"{base_url}/add")  # open console: loopback and no tokens yet
        page.fill("#text-new-source", "Team docs")
        page.fill("#text-title", "Runbook")
        page.fill("#text-content", "Restart the ingest worker when the queue stalls.")
        page.click("#add-text")
        page.wait_for_url(re.compile(r"/documents/"))
        doc_url = page.url
        page.goto(f"{base_url}/add")
        page.fill("#text-new-source", "Private notes")
        page.fill("#text-title", "Salaries")
        page.fill("#text-content", "Nobody outside the team profile may read this.")
        page.click("#add-text")
        page.wait_for_url(re.compile(r"/documents/"))
        private_url = page.url

        page.goto(f"{base_url}/access")
        page.fill("#profile-name", "team")
        page.select_option("#profile-sources", label="Team docs")
        page.click("#create-profile")
        expect(page.locator("#profiles-h + ul")).to_contain_text("team")
        # the search playground can search as a profile: only its sources answer
        page.goto(f"{base_url}/search?q=team+profile+read&type=vector")
        expect(page.locator("main")).to_contain_text("Salaries")
        page.goto(f"{base_url}/search?q=team+profile+read&type=vector&profile=team")
        expect(page.locator("main")).to_contain_text("Runbook")
        assert "Salaries" not in page.locator("main").inner_text()
        admin = create_token(page, base_url, "admin", read_only=False)
        page.click("#open-connect")
        expect(page.locator("#connect-dialog")).to_be_visible()
        expect(page.locator("#entry-claude-code")).to_contain_text(admin)
        for client in ("claude-desktop", "cursor", "vscode"):
            expect(page.locator(f"#entry-{client}")).to_contain_text(f"{base_url}/mcp")
        screenshot(page, "connect-dialog")
        page.click("#copy-claude-code")
        expect(page.locator("#copy-claude-code")).to_have_text("Copied")
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied.startswith(f"claude mcp add --transport http archivist {base_url}/mcp")
        assert f"Authorization: Bearer {admin}" in copied and "\n" not in copied  # one thing to paste
        page.click("#copy-claude-code-json")
        entry = json.loads(page.evaluate("navigator.clipboard.readText()"))
        assert entry["mcpServers"]["archivist"]["url"] == f"{base_url}/mcp"
        assert entry["mcpServers"]["archivist"]["headers"] == {"Authorization": f"Bearer {admin}"}
        page.keyboard.press("Escape")
        screenshot(page, "access")

        # a token exists now: the console asks everyone to sign in
        page.goto(f"{base_url}/")
        expect(page).to_have_url(re.compile(r"/signin"))
        sign_in(page, base_url, admin)
        reader = create_token(page, base_url, "reader", read_only=True, profile="team")
        page.goto(f"{base_url}/activity")
        screenshot(page, "activity")
    finally:
        page.close()

    reader_page = browser.new_page()
    try:
        browser.clear_cookies()
        sign_in(reader_page, base_url, reader)
        reader_page.goto(doc_url)
        expect(reader_page.locator("#doc-title")).to_have_text("Runbook")
        assert reader_page.locator("#delete-document").count() == 0
        # the token's profile confines the console as it confines MCP calls
        reader_page.goto(f"{base_url}/")
        expect(reader_page.locator("main")).to_contain_text("Team docs")
        assert "Private notes" not in reader_page.locator("main").inner_text()
        assert reader_page.goto(private_url).status == 404
        assert reader_page.goto(f"{base_url}/activity").status == 403
        reader_page.goto(f"{base_url}/add")
        assert reader_page.locator("#add-text").count() == 0
        # the server refuses a read-only write even with a valid session and CSRF token
        csrf = reader_page.locator("input[name=csrf]").first.get_attribute("value")
        doc_id = doc_url.rsplit("/", 1)[1].split("?")[0]
        refused = reader_page.request.post(f"{base_url}/documents/{doc_id}/delete", form={"csrf": csrf})
        assert refused.status == 403 and "read-only" in refused.text()
        reader_page.goto(doc_url)
        expect(reader_page.locator("#doc-title")).to_have_text("Runbook")
    finally:
        reader_page.close()
