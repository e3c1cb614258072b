"""Issue 32.1 (profiles managed in the console) and the console half of 32.5 (the activity page's
summary), in Debian's Chromium against a real `archivist serve --http`, checked through the SDK's MCP
client with a token confined to the profile: the edit page changes the search order and the enabled
flag MCP calls see; the form accepts exactly what the profile service accepts; a profile with no
sources says so; edits are owner-only, CSRF-checked and audited."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import asyncpg
import httpx2
import pytest
import pytest_asyncio
from mcp.client.streamable_http import streamable_http_client
from playwright.sync_api import expect

from services.access.profile_settings import NAME_PATTERN
from services.access.scope import Scope, use_scope
from tests.e2e.test_e2e import run_cli, server_env
from tests.support.mcp_helpers import call, client_in_own_task
from tests.support.web_helpers import chromium, console_server, screenshot

TIMEOUT = 10_000
TEXT = "# Tide tables\n\nThe tide tables for the harbour are posted at the pier every Monday."
QUERY = "tide tables posted at the pier"


@pytest_asyncio.fixture(scope="module")
async def world(app: Any) -> dict[str, Any]:
    """The same document in two sources (their scores tie, so the profile's order decides), a profile
    over both (A first), one with no sources; an owner token, an agent and a reader confined to it."""
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        ids: dict[str, Any] = {}
        for key in ("A", "B"):
            source = await app.sources.create(title=f"Harbour {key}", source_type="api")
            await app.documents.create_from_text(source.id, TEXT, title="Tide tables")
            ids[key] = str(source.id)
        await app.profiles.create("harbour", "Harbour notices", [ids["A"], ids["B"]])
        await app.profiles.create("empty", "Nothing yet")
        _, ids["owner"] = await app.tokens.create("harbour-owner", [])
        _, ids["agent"] = await app.tokens.create("harbour-agent", ["harbour"])
        _, ids["reader"] = await app.tokens.create("harbour-reader", ["harbour"], read_only=True)
        return ids


@pytest.fixture(scope="module")
def base_url(world: dict[str, Any], database_url: str, files_dir: Path) -> Iterator[str]:
    with console_server(database_url, files_dir) as url:
        yield url


@pytest.fixture(scope="module")
def browser(base_url: str) -> Iterator[Any]:
    with chromium() as context:
        context.set_default_timeout(TIMEOUT)
        yield context


def in_thread(coroutine: Any) -> Any:
    """Run a coroutine on a loop of its own (Playwright's sync API holds this thread's)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def mcp_search(base_url: str, secret: str) -> dict[str, Any]:
    """search_knowledge_base through the SDK's client over HTTP, as the token's caller."""

    async def run() -> dict[str, Any]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=30)
        async with client_in_own_task(streamable_http_client(f"{base_url}/mcp", http_client=http)) as client:
            return await call(client, "search_knowledge_base", query=QUERY, match_count=2)

    return in_thread(run())


def audit_actions(database_url: str) -> list[tuple[str, str | None]]:
    """(action, error message) of the console's audit entries, oldest first."""

    async def run() -> list[tuple[str, str | None]]:
        conn = await asyncpg.connect(database_url)
        try:
            for _ in range(50):  # written off the request path
                rows = await conn.fetch(
                    "SELECT action, error_message FROM audit_log WHERE tool = 'console' ORDER BY id"
                )
                if any(r["action"] == "switch_profile" for r in rows):
                    break
                await asyncio.sleep(0.1)
            return [(r["action"], r["error_message"]) for r in rows]
        finally:
            await conn.close()

    return in_thread(run())


def sign_in(page: Any, base_url: str, secret: str) -> None:
    page.goto(f"{base_url}/signin")
    page.fill("#token-input", secret)
    page.click("#signin-button")
    expect(page).to_have_url(f"{base_url}/")


def test_profiles_managed_in_the_console(
    browser: Any, base_url: str, world: dict[str, Any], database_url: str, files_dir: Path
) -> None:
    first = mcp_search(base_url, world["agent"])
    assert [r["metadata"]["source_id"] for r in first["results"]] == [world["A"], world["B"]]

    page = browser.new_page()
    sign_in(page, base_url, world["owner"])
    page.goto(f"{base_url}/access")
    expect(page.locator("#profile-empty .profile-sources")).to_have_text("no sources")  # never "all"
    expect(page.locator("#profile-harbour .profile-sources")).to_have_text("Harbour A, Harbour B")
    # the create form accepts exactly the names the service accepts
    name = page.locator("#profile-name")
    assert name.get_attribute("pattern") == NAME_PATTERN
    for bad in ("Bad.Name", "-dash", "UPPER"):
        name.fill(bad)
        assert name.evaluate("e => e.validity.patternMismatch"), bad
    name.fill("good_name-2")
    assert name.evaluate("e => e.validity.valid")
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    refused = page.request.post(f"{base_url}/access/profiles", form={"csrf": csrf, "name": "Bad.Name"})
    assert refused.status == 400 and "Invalid profile name" in refused.text()

    page.click("#edit-harbour")
    expect(page).to_have_url(f"{base_url}/access/profiles/harbour")
    rows = page.locator("#profile-sources-table tbody tr")
    expect(rows.first).to_contain_text("Harbour A")
    assert page.locator("#profile-description").get_attribute("maxlength") == "1000"
    page.fill("#profile-description", "Notices posted at the harbour")
    page.fill(f"#position-{world['B']}", "1")
    page.fill(f"#position-{world['A']}", "2")
    page.select_option("#profile-search-type", "keyword")
    page.fill("#profile-match-count", "5")
    page.fill("#profile-snippet-chars", "300")
    page.uncheck("#profile-all-fields")
    for box in page.locator("#profile-hit-fields input").all():
        box.uncheck()
    page.check("#hit-field-metadata")
    page.check("#hit-field-heading_path")
    page.click("#save-profile")
    expect(page.locator("#profile-saved")).to_be_visible()
    screenshot(page, "profile-edit")
    expect(rows.first).to_contain_text("Harbour B")  # its sources listed in the new order
    assert page.locator(f"#position-{world['B']}").input_value() == "1"
    assert page.locator("#profile-snippet-chars").input_value() == "300"

    shown = json.loads(run_cli(["profile", "show", "harbour", "--json"], server_env(database_url, files_dir)).stdout)
    assert shown["source_ids"] == [world["B"], world["A"]] and shown["description"] == "Notices posted at the harbour"
    assert (shown["search_type"], shown["match_count"]) == ("keyword", 5)
    assert (shown["snippet_chars"], shown["hit_fields"]) == (300, ["metadata", "heading_path"])
    again = mcp_search(base_url, world["agent"])  # the new order decides the tie
    assert [r["metadata"]["source_id"] for r in again["results"]] == [world["B"], world["A"]]
    for hit in again["results"]:  # the profile's output settings shape every hit
        assert set(hit) == {"chunk_id", "document_id", "text", "truncated", "metadata", "heading_path"}, hit
        assert len(hit["text"]) <= 300
    assert again["search_type"] == "keyword"

    # what the browser would refuse, the service refuses too (one validation)
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    for form, message in (
        ({"description": "x" * 1001}, "1,000"),
        ({"snippet_chars": "20"}, "snippet_chars"),
        ({"hit_field": "secret_field"}, "Unknown hit field"),
        ({"match_count": "99"}, "match_count"),
    ):
        bad = page.request.post(f"{base_url}/access/profiles/harbour", form={"csrf": csrf, **form})
        assert bad.status == 400 and message in bad.text(), (form, bad.text()[:300])
    assert page.request.post(f"{base_url}/access/profiles/harbour", form={"enabled": "on"}).status == 403  # no CSRF

    page.goto(f"{base_url}/access")
    page.click("#switch-harbour")  # disable: every call through the profile is refused
    expect(page.locator("#profile-harbour")).to_contain_text("disabled")
    refused_call = mcp_search(base_url, world["agent"])
    assert refused_call["error_code"] == "NOT_FOUND" and "disabled" in refused_call["error"]
    page.click("#switch-harbour")
    expect(page.locator("#switch-harbour")).to_have_text("Disable")
    assert mcp_search(base_url, world["agent"])["success"] is True

    page.goto(f"{base_url}/activity")  # the summary of 32.5: calls per profile and tool, top queries
    summary = page.locator("#summary-table")
    expect(summary.locator("tr", has_text="search_knowledge_base").filter(has_text="harbour")).to_have_count(1)
    expect(page.locator("#top-queries li").first).to_contain_text(QUERY)
    expect(page.locator("#summary-total")).to_contain_text("p95")
    screenshot(page, "activity-summary")
    page.close()
    actions = audit_actions(database_url)
    assert {"create_profile", "update_profile", "switch_profile"} <= {a for a, _ in actions}
    messages = [m for a, m in actions if a == "update_profile" and m]  # refusals keep their message
    assert any("1,000" in m for m in messages) and any("CSRF" in m for m in messages)

    # owner only: a token confined to the profile is refused the page and the posts
    reader = browser.new_page()
    browser.clear_cookies()
    sign_in(reader, base_url, world["reader"])
    assert reader.goto(f"{base_url}/access/profiles/harbour").status == 403
    csrf = reader.locator("input[name=csrf]").first.get_attribute("value")
    post = reader.request.post(f"{base_url}/access/profiles/harbour/enabled", form={"csrf": csrf, "enabled": "false"})
    assert post.status == 403
    reader.close()
    assert mcp_search(base_url, world["agent"])["success"] is True  # still enabled
