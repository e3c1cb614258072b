"""SSRF attacks on the crawler's HTTP fetches: DNS rebinding, redirect hops, discovery files, odd addresses.

Real HTTP servers on loopback: the fixture site on 127.0.0.1 (treated as public) and a trap on
127.0.0.2, same port, that must never receive a request. See `tests.security.ssrf_support`.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from services.core.errors import PermissionDenied
from services.core.settings import Settings
from services.crawl.discovery import discover
from services.crawl.politeness import HostThrottle
from services.crawl.robots_cache import RobotsCache
from services.fetchers.crawl4ai_http import Crawl4aiHttpFetcher
from services.net.safety import check_url_allowed
from tests.security.ssrf_support import PRIVATE, PUBLIC, RebindingDNS, Trap, pretend_public
from tests.support.fixture_site import FixtureSite

UA = "ArchivistBot/0.1 (+https://github.com/archivist)"


@pytest.fixture(autouse=True)
def _restore_crawl4ai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fetchers point CRAWL4_AI_BASE_DIRECTORY at tmp dirs; monkeypatch restores it after each test."""
    monkeypatch.setenv("CRAWL4_AI_BASE_DIRECTORY", os.environ.get("CRAWL4_AI_BASE_DIRECTORY", ""))


def strict_settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"crawl_allow_private": False, "data_dir": tmp_path, "crawl_page_timeout": 5.0}
    values.update(overrides)
    return Settings(_env_file=None, **values)


@pytest.fixture
def site() -> Iterator[FixtureSite]:
    with FixtureSite() as running:
        yield running


@pytest.fixture
def trap(site: FixtureSite) -> Iterator[Trap]:
    """The private server, on the site's port so a rebound name reaches it."""
    with Trap(PRIVATE, site.port) as running:
        yield running


@pytest.fixture
async def fetcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Crawl4aiHttpFetcher]:
    """The page fetcher with private addresses refused; 127.0.0.1 counts as public."""
    pretend_public(monkeypatch)
    built = Crawl4aiHttpFetcher(strict_settings(tmp_path))
    yield built
    await built.close()


async def test_page_fetch_connects_to_the_checked_address(
    fetcher: Crawl4aiHttpFetcher, site: FixtureSite, trap: Trap, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name answers public to the check and private afterwards: the request still goes to the public one."""
    dns = RebindingDNS(monkeypatch, {"rebind.test": [PUBLIC, PRIVATE]})
    result = await fetcher.fetch(f"http://rebind.test:{site.port}/docs/a")
    assert trap.hits == [], "the request reached the private address the name rebound to"
    assert dns.lookups["rebind.test"] == 1
    assert result.ok and result.title == "Brewing Espresso"
    assert site.requests_for("/docs/a")[0].headers["host"] == f"rebind.test:{site.port}"


async def test_redirect_hops_are_checked_and_pinned(
    fetcher: Crawl4aiHttpFetcher, site: FixtureSite, trap: Trap, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each hop connects to the address checked for it; a hop to a private address is refused at the hop."""
    dns = RebindingDNS(monkeypatch, {"rebind.test": [PUBLIC, PRIVATE], "internal.test": [PRIVATE]})
    site.set_redirect("/to-rebind", f"http://rebind.test:{site.port}/docs/b")
    site.set_redirect("/to-internal", f"http://internal.test:{site.port}/secret")
    site.set_redirect("/to-mapped", f"http://[::ffff:{PRIVATE}]:{site.port}/secret")
    site.set_redirect("/to-site-local", "http://[fec0::1]/secret")

    rebound = await fetcher.fetch(site.url_for("/to-rebind"))
    assert trap.hits == [], "the redirect hop reached the private address the name rebound to"
    assert rebound.ok and rebound.final_url == f"http://rebind.test:{site.port}/docs/b"
    assert dns.lookups["rebind.test"] == 1

    for path, reason in [("/to-internal", "loopback"), ("/to-mapped", "loopback (IPv4 inside IPv6)")]:
        refused = await fetcher.fetch(site.url_for(path))
        assert (refused.status, refused.ok) == (0, False)
        assert refused.error is not None and refused.error.startswith("blocked:") and reason in refused.error
    site_local = await fetcher.fetch(site.url_for("/to-site-local"))
    assert site_local.final_url == "http://[fec0::1]/secret"
    assert site_local.error is not None and "a site-local address" in site_local.error
    assert trap.hits == []


async def test_robots_sitemaps_and_llms_txt_are_checked_and_pinned(
    tmp_path: Path, site: FixtureSite, trap: Trap, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Crawl discovery (robots.txt, its sitemaps, /sitemap.xml, /llms.txt) never reaches the private server."""
    pretend_public(monkeypatch)
    port = site.port
    dns = RebindingDNS(
        monkeypatch,
        {"rebind.test": [PUBLIC, PRIVATE], "rebind-sitemap.test": [PUBLIC, PRIVATE], "internal.test": [PRIVATE]},
    )
    site.set_page(
        "/robots.txt",
        "User-agent: *\nDisallow: /private/\n"
        f"Sitemap: http://rebind-sitemap.test:{port}/sitemap-a.xml\n"
        f"Sitemap: http://internal.test:{port}/sitemap-internal.xml\n",
        "text/plain",
    )
    site.set_page("/sitemap-a.xml", site.sitemap_xml(["/docs/a"]), "application/xml")
    site.set_redirect("/sitemap.xml", f"http://internal.test:{port}/sitemap.xml")
    site.set_redirect("/llms.txt", f"http://[::ffff:{PRIVATE}]:{port}/llms.txt")

    robots = RobotsCache(strict_settings(tmp_path), HostThrottle(2, 0.0, 4), [])
    policy = await robots.policy(f"http://rebind.test:{port}/docs/a")
    assert trap.hits == [], "the robots.txt fetch reached the private address the name rebound to"
    assert site.requests_for("/robots.txt")[0].headers["host"] == f"rebind.test:{port}"
    assert not policy.can_fetch(f"http://rebind.test:{port}/private/x")

    settings = strict_settings(tmp_path)
    found = await discover(site.url_for("/"), RobotsCache(settings, HostThrottle(2, 0.0, 4), []), settings)
    assert trap.hits == [], "a sitemap or llms.txt fetch reached the private server"
    assert dns.lookups["rebind.test"] == 1 and dns.lookups["rebind-sitemap.test"] == 1
    assert found == [(site.url_for("/docs/a"), "sitemap")]
    assert dns.lookups["internal.test"] == 2  # the robots.txt sitemap and the /sitemap.xml hop: both refused


REFUSED: list[tuple[str, str]] = [
    ("fec0::1", "site-local"),
    ("fec0:1234::5", "site-local"),
    ("::ffff:10.0.0.1", "private (IPv4 inside IPv6)"),
    ("::ffff:127.0.0.2", "loopback (IPv4 inside IPv6)"),
    ("::ffff:169.254.169.254", "cloud metadata (IPv4 inside IPv6)"),
    ("64:ff9b::7f00:1", "loopback (IPv4 inside IPv6)"),
    ("64:ff9b::a9fe:a9fe", "cloud metadata (IPv4 inside IPv6)"),
    ("64:ff9b::a00:1", "private (IPv4 inside IPv6)"),
    ("2002:c0a8:1::1", "private (IPv4 inside IPv6)"),
    ("2002:7f00:1::1", "loopback (IPv4 inside IPv6)"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "private"),  # Teredo
    ("3fff::1", "non-public"),  # documentation (RFC 9637)
    ("fe80::1", "link-local"),
    ("ff02::1", "multicast"),
    ("0.1.2.3", "private"),
    ("100.64.0.1", "non-public"),
    ("169.254.1.1", "link-local"),
    ("224.0.0.1", "multicast"),
    ("240.0.0.1", "private"),
]
ALLOWED = ["64:ff9b::808:808", "2002:808:808::1", "8.8.8.8", "2606:4700:4700::1111"]


def url_for_address(address: str, path: str = "/") -> str:
    parsed = ipaddress.ip_address(address)
    return f"http://[{address}]{path}" if parsed.version == 6 else f"http://{address}{path}"


async def test_blocked_address_list() -> None:
    """fec0::/10 and private IPv4 inside IPv6 (mapped, 6to4, NAT64) are refused; public NAT64/6to4 is not."""
    wrong: list[str] = []
    for address, reason in REFUSED:
        try:
            await check_url_allowed(url_for_address(address), allow_private=False)
            wrong.append(f"{address}: allowed")
        except PermissionDenied as exc:
            if f"a {reason} address" not in exc.message:
                wrong.append(f"{address}: {exc.message}")
    for address in ALLOWED:
        try:
            await check_url_allowed(url_for_address(address), allow_private=False)
        except PermissionDenied as exc:
            wrong.append(f"{address}: {exc.message}")
    assert wrong == []


async def test_refused_addresses_are_never_connected(fetcher: Crawl4aiHttpFetcher, trap: Trap) -> None:
    """A fetch of fec0::1 or of an IPv4-mapped private address is refused before a connection is tried."""
    site_local = await fetcher.fetch("http://[fec0::1]/")
    assert site_local.error is not None and site_local.error.startswith("blocked:"), site_local.error
    assert "site-local" in site_local.error
    mapped = await fetcher.fetch(f"http://[::ffff:{PRIVATE}]:{trap.port}/")
    assert mapped.error is not None and "loopback (IPv4 inside IPv6)" in mapped.error
    assert trap.hits == []


async def test_allow_private_still_crawls_loopback(tmp_path: Path, site: FixtureSite) -> None:
    """With crawl_allow_private, loopback fixtures are fetched (and still pinned: one lookup per connection)."""
    built = Crawl4aiHttpFetcher(strict_settings(tmp_path, crawl_allow_private=True))
    try:
        result = await built.fetch(f"http://localhost:{site.port}/docs/a")
    finally:
        await built.close()
    assert result.ok and result.title == "Brewing Espresso"
