"""SSRF through the browser fetcher: a rendered page's subresources never reach a private address.

A real headless Chromium (crawl4ai managed browser) renders a page from the fixture site (127.0.0.1,
treated as public) whose image, script, fetch() and WebSocket requests point at the trap on 127.0.0.2:
directly, through a redirect, and through a name that Chromium's own resolver maps to 127.0.0.2 (what
a rebinding DNS would answer Chromium after the guard's own lookup said 127.0.0.1). A WebSocket is
not seen by Playwright routes at all: only Chromium's network isolation stops it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.core.settings import Settings
from tests.security.ssrf_support import PRIVATE, PUBLIC, RebindingDNS, Trap, pretend_public
from tests.support.fixture_site import FixtureSite, html_page

CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(
    not (os.access(CHROMIUM, os.X_OK) and shutil.which("chromium")), reason=f"no Chromium at {CHROMIUM}"
)


@pytest.fixture(autouse=True)
def _restore_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fetchers set CRAWL4_AI_BASE_DIRECTORY (and maybe CRAWL4AI_CHROMIUM_SANDBOX); restore both."""
    for name in ("CRAWL4_AI_BASE_DIRECTORY", "CRAWL4AI_CHROMIUM_SANDBOX"):
        monkeypatch.setenv(name, os.environ.get(name, ""))


@pytest.fixture
def site() -> Iterator[FixtureSite]:
    with FixtureSite() as running:
        yield running


@pytest.fixture
def trap(site: FixtureSite) -> Iterator[Trap]:
    with Trap(PRIVATE, site.port) as running:
        yield running


def hostile_page(port: int) -> str:
    private = f"http://{PRIVATE}:{port}"
    body = html_page(
        "Lighthouse Keeping",
        [
            "Lighthouse keepers trimmed wicks, wound the clockwork and logged every passing ship through the "
            "long winter nights on the rocky headland.",
        ],
    )
    hostile = (
        f'<img src="{private}/direct.png"><img src="http://rebind.test:{port}/rebind.png">'
        f'<img src="/to-private.png"><script src="/app.js"></script>'
        f'<script>fetch("{private}/xhr").catch(() => null);'
        f'try {{ new WebSocket("ws://{PRIVATE}:{port}/ws"); }} catch (e) {{}}</script>'
    )
    return body.replace("</body>", hostile + "</body>")


APP_JS = """
const p = document.createElement("p");
p.textContent = "Rendered by script: the keeper's log records the fog signal sounding for nine hours straight.";
document.querySelector("main, article, body").appendChild(p);
"""


async def test_browser_subresources_never_reach_private_addresses(
    tmp_path: Path, site: FixtureSite, trap: Trap, monkeypatch: pytest.MonkeyPatch
) -> None:
    from services.fetchers import browser

    pretend_public(monkeypatch)
    RebindingDNS(monkeypatch, {"rebind.test": [PUBLIC, PRIVATE]})
    # Chromium's own resolver answers the rebound address (only used if Chromium resolves names itself).
    flags: list[Any] = [*browser.CHROMIUM_FLAGS, f"--host-resolver-rules=MAP rebind.test {PRIVATE}"]
    monkeypatch.setattr(browser, "CHROMIUM_FLAGS", flags)
    site.set_page("/page", hostile_page(site.port))
    site.set_page("/app.js", APP_JS, "application/javascript")
    site.set_redirect("/to-private.png", f"http://{PRIVATE}:{site.port}/redirected.png")

    settings = Settings(
        _env_file=None,
        data_dir=tmp_path,
        crawl_allow_private=False,
        crawl_browser=True,
        crawl_browser_path=CHROMIUM,
        crawl_page_timeout=30.0,
    )
    fetcher = browser.BrowserFetcher(settings)
    try:
        result = await fetcher.fetch(site.url_for("/page"))
        await asyncio.sleep(1.0)  # late image/fetch() requests would arrive now
    finally:
        await fetcher.close()
    assert trap.hits == [], f"the rendered page reached the private server: {trap.hits}"
    assert result.ok, result.error
    assert "Rendered by script" in result.markdown, "the page was not rendered by the browser"
    assert site.requests_for("/app.js") and site.requests_for("/to-private.png")


async def test_chromium_has_no_network_of_its_own(trap: Trap) -> None:
    """What a route cannot see (WebSocket, WebRTC, a worker's fetch) meets Chromium's isolation flags."""
    from services.fetchers.browser_guard import ISOLATION_FLAGS

    sandbox = ["--no-sandbox"] if os.geteuid() == 0 else []
    process = await asyncio.create_subprocess_exec(
        CHROMIUM,
        "--headless=new",
        "--disable-gpu",
        *sandbox,
        *ISOLATION_FLAGS,
        "--dump-dom",
        f"http://{PRIVATE}:{trap.port}/direct",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    dom, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    assert trap.hits == [], "Chromium connected to the private server by itself"
    assert b"Internal secret" not in dom
