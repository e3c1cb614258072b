"""Tests for the DB-free crawl building blocks: URLs, robots/sitemaps, SSRF guard, throttle, fetcher."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from services.core.errors import InvalidArgument, PermissionDenied
from services.core.settings import Settings
from services.crawl.politeness import HostThrottle
from services.fetchers import create_fetcher
from services.fetchers.crawl4ai_http import Crawl4aiHttpFetcher
from services.net import safety
from services.net.robots import RobotsPolicy, parse_llms_txt
from services.net.safety import check_url_allowed
from services.net.sitemap import parse_sitemap
from services.net.text_fetch import fetch_text
from services.net.urls import host_key, in_scope, matches_patterns, normalize_url, registrable_domain
from tests.support.fixture_site import DEFAULT_LINKS, FIXED_LAST_MODIFIED, FixtureSite

UA = "ArchivistBot/0.1 (+https://github.com/archivist)"


@pytest.fixture(autouse=True)
def _restore_crawl4ai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fetchers point CRAWL4_AI_BASE_DIRECTORY at tmp dirs; monkeypatch restores it after each test."""
    monkeypatch.setenv("CRAWL4_AI_BASE_DIRECTORY", os.environ.get("CRAWL4_AI_BASE_DIRECTORY", ""))


@pytest.fixture
def site() -> Iterator[FixtureSite]:
    """The fixture website (same as `tests.support.fixture_site.fixture_site`, under a shorter name)."""
    with FixtureSite() as running:
        yield running


# --------------------------------------------------------------------------- URLs


@pytest.mark.parametrize(
    ("url", "base", "expected"),
    [
        ("HTTP://Example.COM", None, "http://example.com/"),
        ("http://example.com:80/a", None, "http://example.com/a"),
        ("https://example.com:443/a#section", None, "https://example.com/a"),
        ("https://example.com:8443/a", None, "https://example.com:8443/a"),
        ("http://example.com/a/./b/../c?q=2&a=1", None, "http://example.com/a/c?q=2&a=1"),
        ("http://example.com/a/b/..", None, "http://example.com/a/"),
        ("../c", "http://example.com/a/b/", "http://example.com/a/c"),
        ("/x?y=1#z", "https://h.example/a", "https://h.example/x?y=1"),
        ("//cdn.example/lib", "https://h.example/a", "https://cdn.example/lib"),
        ("http://example.com/a b/é", None, "http://example.com/a%20b/%C3%A9"),
        ("http://example.com/a%20b", None, "http://example.com/a%20b"),
        ("http://[::1]:8080/x", None, "http://[::1]:8080/x"),
        ("http://user:secret@example.com/", None, "http://example.com/"),
        ("mailto:someone@example.com", None, None),
        ("javascript:void(0)", "https://h.example/", None),
        ("ftp://example.com/file", None, None),
        ("http:///no-host", None, None),
        ("http://example.com:99999/", None, None),
        ("   ", "https://h.example/", None),
    ],
)
def test_normalize_url(url: str, base: str | None, expected: str | None) -> None:
    assert normalize_url(url, base) == expected


def test_normalize_url_is_idempotent() -> None:
    once = normalize_url("HTTPS://Docs.Example.com:443/a/../b/./c d?x=1#top")
    assert once == "https://docs.example.com/b/c%20d?x=1"
    assert normalize_url(once) == once


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://Example.com/a", "https://example.com:443"),
        ("http://example.com", "http://example.com:80"),
        ("http://h.example:8080/x?y", "http://h.example:8080"),
        ("http://[::1]:9000/", "http://[::1]:9000"),
    ],
)
def test_host_key(url: str, expected: str) -> None:
    assert host_key(url) == expected


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("docs.example.com", "example.com"),
        ("example.com", "example.com"),
        ("www.example.co.uk", "example.co.uk"),
        ("a.b.example.com.au", "example.com.au"),
        ("127.0.0.1", "127.0.0.1"),
        ("localhost", "localhost"),
    ],
)
def test_registrable_domain(host: str, expected: str) -> None:
    assert registrable_domain(host) == expected


@pytest.mark.parametrize(
    ("url", "scope", "expected"),
    [
        ("https://docs.example.com/x", "same-host", True),
        ("http://docs.example.com:8080/x", "same-host", True),
        ("https://www.example.com/x", "same-host", False),
        ("https://www.example.com/x", "same-domain", True),
        ("https://example.com/", "same-domain", True),
        ("https://example.org/", "same-domain", False),
        ("https://docs.example.com/guide/intro/part2", "under-path", True),
        ("https://docs.example.com/guide/other", "under-path", True),
        ("https://docs.example.com/blog/post", "under-path", False),
        ("https://www.example.com/guide/other", "under-path", False),
    ],
)
def test_in_scope(url: str, scope: Any, expected: bool) -> None:
    assert in_scope(url, "https://docs.example.com/guide/intro", scope) is expected


def test_same_domain_with_country_second_level() -> None:
    assert in_scope("https://shop.example.co.uk/", "https://www.example.co.uk/", "same-domain")
    assert not in_scope("https://other.co.uk/", "https://www.example.co.uk/", "same-domain")


def test_under_path_with_trailing_slash_start() -> None:
    assert in_scope("https://h.example/docs/", "https://h.example/docs/", "under-path")
    assert in_scope("https://h.example/docs/a/b", "https://h.example/docs/", "under-path")
    assert not in_scope("https://h.example/docsearch", "https://h.example/docs/", "under-path")


@pytest.mark.parametrize(
    ("url", "include", "exclude", "expected"),
    [
        ("https://h.example/docs/a", None, None, True),
        ("https://h.example/docs/a", [], [], True),
        ("https://h.example/docs/a", ["/docs/*"], None, True),
        ("https://h.example/blog/a", ["/docs/*"], None, False),
        ("https://h.example/docs/file.pdf", ["/docs/*"], ["*.pdf"], False),
        ("https://h.example/docs/a?page=2", None, ["*?page=*"], False),
        ("https://h.example/docs/a?page=2", ["*.html"], None, False),
        ("https://h.example/docs/a.html?x=1", ["*.html"], None, True),
        ("https://h.example/archive/2020", None, ["archive"], False),
        ("https://h.example/docs/a", ["h.example/docs"], None, True),
        ("https://h.example/Docs/a", ["/docs/*"], None, False),
        ("https://h.example/docs/a", ["https://h.example/docs/*"], None, True),
        ("https://other.example/docs/a", ["https://h.example/docs/*"], None, False),
    ],
)
def test_matches_patterns(url: str, include: list[str] | None, exclude: list[str] | None, expected: bool) -> None:
    assert matches_patterns(url, include, exclude) is expected


# --------------------------------------------------------------------------- robots, sitemaps, llms.txt

ROBOTS = """\
# comment line
User-agent: *
Disallow: /private/
Allow: /private/public-note
Disallow: /*.pdf$
Crawl-delay: 2

User-agent: ArchivistBot
Disallow: /no-archivist/
Crawl-delay: 0.5

Sitemap: https://h.example/sitemap.xml
Sitemap: https://h.example/sitemap-news.xml
"""


def test_robots_generic_group_for_other_agents() -> None:
    policy = RobotsPolicy(ROBOTS, "OtherBot/1.0")
    assert policy.can_fetch("https://h.example/docs/a")
    assert not policy.can_fetch("https://h.example/private/secret")
    assert policy.can_fetch("https://h.example/private/public-note")  # longest match wins
    assert not policy.can_fetch("https://h.example/files/report.pdf")
    assert policy.can_fetch("https://h.example/files/report.pdf?download=0")  # "$" anchors the end
    assert policy.can_fetch("https://h.example/robots.txt")
    assert policy.crawl_delay == 2.0
    assert policy.sitemaps == ["https://h.example/sitemap.xml", "https://h.example/sitemap-news.xml"]


def test_robots_specific_group_for_our_agent() -> None:
    policy = RobotsPolicy(ROBOTS, UA)
    assert not policy.can_fetch("https://h.example/no-archivist/page")
    assert policy.can_fetch("https://h.example/private/secret")  # only the specific group applies
    assert policy.crawl_delay == 0.5


def test_robots_empty_disallow_does_not_merge_groups() -> None:
    text = "User-agent: OtherBot\nDisallow:\n\nUser-agent: *\nDisallow: /\n"
    assert RobotsPolicy(text, "OtherBot").can_fetch("https://h.example/x")
    assert not RobotsPolicy(text, UA).can_fetch("https://h.example/x")
    assert RobotsPolicy(text, UA).crawl_delay is None


def test_robots_from_response_status() -> None:
    assert RobotsPolicy.from_response(404, "", UA).can_fetch("https://h.example/x")
    assert not RobotsPolicy.from_response(503, "", UA).can_fetch("https://h.example/x")
    assert not RobotsPolicy.from_response(0, "", UA).can_fetch("https://h.example/x")
    parsed = RobotsPolicy.from_response(200, "User-agent: *\nDisallow: /x\n", UA)
    assert not parsed.can_fetch("https://h.example/x/y")
    assert parsed.can_fetch("https://h.example/y")


def test_parse_sitemap_urlset_with_namespace() -> None:
    xml = """<?xml version="1.0" encoding="UTF-8"?>
    <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
      <url><loc> https://h.example/a </loc><lastmod>2024-01-01</lastmod></url>
      <url><loc>https://h.example/b</loc></url>
      <url><lastmod>2024-01-01</lastmod></url>
    </urlset>"""
    assert parse_sitemap(xml) == (["https://h.example/a", "https://h.example/b"], [])


def test_parse_sitemap_index_without_namespace() -> None:
    xml = """<sitemapindex><sitemap><loc>https://h.example/s1.xml</loc></sitemap>
    <sitemap><loc>https://h.example/s2.xml</loc></sitemap></sitemapindex>"""
    assert parse_sitemap(xml) == ([], ["https://h.example/s1.xml", "https://h.example/s2.xml"])


@pytest.mark.parametrize("junk", ["", "not xml at all", "<urlset><url><loc>x</loc>", "<html><body/></html>"])
def test_parse_sitemap_junk(junk: str) -> None:
    assert parse_sitemap(junk) == ([], [])


def test_parse_llms_txt() -> None:
    text = """# Project

> Summary with a [relative link](/docs/intro) and an [absolute one](https://other.example/x#frag).

- [Guide](guide/start.md "The guide"): how to start
- [Again](/docs/intro)
- [Mail](mailto:team@example.com)
"""
    assert parse_llms_txt(text, "https://h.example/llms.txt") == [
        "https://h.example/docs/intro",
        "https://other.example/x",
        "https://h.example/guide/start.md",
    ]


async def test_fetch_text_robots_and_sitemap_from_site(site: FixtureSite) -> None:
    status, text = await fetch_text(
        site.url_for("/robots.txt"), user_agent=UA, timeout=5, max_bytes=10_000, allow_private=True
    )
    assert status == 200
    policy = RobotsPolicy(text, UA)
    assert not policy.can_fetch(site.url_for("/private/secret"))
    assert policy.can_fetch(site.url_for("/docs/a"))
    assert policy.sitemaps == [site.url_for("/sitemap.xml")]

    status, xml = await fetch_text(policy.sitemaps[0], user_agent=UA, timeout=5, max_bytes=100_000, allow_private=True)
    pages, nested = parse_sitemap(xml)
    assert status == 200 and nested == []
    assert site.url_for("/sitemap-only") in pages

    status, llms = await fetch_text(
        site.url_for("/llms.txt"), user_agent=UA, timeout=5, max_bytes=10_000, allow_private=True
    )
    assert parse_llms_txt(llms, site.url_for("/llms.txt")) == [
        site.url_for("/docs/a"),
        site.url_for("/docs/b"),
    ]
    assert site.requests_for("/robots.txt")[0].headers["user-agent"] == UA


async def test_fetch_text_statuses_errors_and_limits(site: FixtureSite) -> None:
    assert await fetch_text(site.url_for("/missing"), user_agent=UA, timeout=5, max_bytes=100, allow_private=True) == (
        404,
        "<html><body><h1>Not Found</h1></body></html>",
    )
    status, text = await fetch_text(
        site.url_for("/robots.txt"), user_agent=UA, timeout=5, max_bytes=10, allow_private=True
    )
    assert (status, text) == (200, "User-agent")
    closed_port = FixtureSite(with_defaults=False).start()
    dead_url = closed_port.url_for("/robots.txt")
    closed_port.stop()
    assert await fetch_text(dead_url, user_agent=UA, timeout=2, max_bytes=100, allow_private=True) == (0, "")


async def test_fetch_text_follows_redirects_and_checks_every_hop(site: FixtureSite) -> None:
    site.set_redirect("/robots-moved", "/robots.txt", status=301)
    url = site.url_for("/robots-moved")
    status, text = await fetch_text(url, user_agent=UA, timeout=5, max_bytes=10_000, allow_private=True)
    assert status == 200 and "Disallow: /private/" in text
    requests_before = len(site.request_log)
    assert await fetch_text(url, user_agent=UA, timeout=5, max_bytes=10_000, allow_private=False) == (0, "")
    assert len(site.request_log) == requests_before  # refused before any request


# --------------------------------------------------------------------------- SSRF guard

PRIVATE_URLS = [
    ("http://127.0.0.1/", "loopback"),
    ("http://10.1.2.3/admin", "private"),
    ("http://192.168.0.10/", "private"),
    ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
    ("http://100.100.100.200/", "cloud metadata"),
    ("http://[fd00:ec2::254]/", "cloud metadata"),
    ("http://[::1]:8080/", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "loopback (IPv4 inside IPv6)"),
    ("http://[::ffff:a9fe:a9fe]/", "cloud metadata (IPv4 inside IPv6)"),
    ("http://localhost:8080/", "loopback"),
    ("http://0.0.0.0/", "unspecified"),
    ("http://224.0.0.1/", "multicast"),
    ("http://100.64.0.1/", "non-public"),
]


@pytest.mark.parametrize(("url", "address_class"), PRIVATE_URLS)
async def test_private_addresses_refused(url: str, address_class: str) -> None:
    with pytest.raises(PermissionDenied) as info:
        await check_url_allowed(url, allow_private=False)
    assert f"a {address_class} address" in info.value.message
    assert "ARCHIVIST_CRAWL_ALLOW_PRIVATE" in info.value.suggestion
    assert info.value.code == "PERMISSION_DENIED"


@pytest.mark.parametrize(("url", "address_class"), PRIVATE_URLS)
async def test_private_addresses_allowed_when_configured(url: str, address_class: str) -> None:
    assert await check_url_allowed(url, allow_private=True) is None


async def test_public_address_allowed() -> None:
    assert await check_url_allowed("https://93.184.215.14/page", allow_private=False) is None
    assert await check_url_allowed("http://[2606:4700:4700::1111]/", allow_private=False) is None


async def test_any_private_record_refuses_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    real = safety.resolve_addresses

    async def mixed(host: str, port: int) -> list[Any]:
        return [*(await real("93.184.215.14", port)), *(await real("10.0.0.7", port))]

    monkeypatch.setattr(safety, "resolve_addresses", mixed)
    with pytest.raises(PermissionDenied, match="10.0.0.7"):
        await check_url_allowed("https://dual.example/", allow_private=False)


@pytest.mark.parametrize("allow_private", [False, True])
@pytest.mark.parametrize("url", ["ftp://example.com/file", "file:///etc/passwd", "http://", "not a url"])
async def test_bad_scheme_or_host_is_invalid(url: str, allow_private: bool) -> None:
    with pytest.raises(InvalidArgument):
        await check_url_allowed(url, allow_private=allow_private)


async def test_unresolvable_host_is_invalid() -> None:
    with pytest.raises(InvalidArgument, match="cannot resolve"):
        await check_url_allowed("http://no-such-host.invalid/", allow_private=False)


# --------------------------------------------------------------------------- throttle


async def _run_in_slots(
    throttle: HostThrottle, urls: list[str], hold: float
) -> tuple[list[tuple[str, float]], int, dict[str, int]]:
    """Run one task per URL through `throttle`; return start times, global and per-host peak concurrency."""
    starts: list[tuple[str, float]] = []
    active = {"all": 0, "peak": 0}
    per_host: dict[str, int] = {}
    per_host_peak: dict[str, int] = {}

    async def task(url: str) -> None:
        key = host_key(url)
        async with throttle.slot(url):
            starts.append((key, time.monotonic()))
            active["all"] += 1
            active["peak"] = max(active["peak"], active["all"])
            per_host[key] = per_host.get(key, 0) + 1
            per_host_peak[key] = max(per_host_peak.get(key, 0), per_host[key])
            await asyncio.sleep(hold)
            per_host[key] -= 1
            active["all"] -= 1

    await asyncio.gather(*(task(url) for url in urls))
    return starts, active["peak"], per_host_peak


def _gaps(starts: list[tuple[str, float]], key: str) -> list[float]:
    times = sorted(t for k, t in starts if k == key)
    return [b - a for a, b in zip(times, times[1:], strict=False)]


async def test_throttle_spaces_starts_per_host_even_with_concurrency() -> None:
    throttle = HostThrottle(per_host_concurrency=2, min_delay_seconds=0.15, global_concurrency=10)
    urls = [f"http://a.example/{i}" for i in range(4)] + ["http://b.example/1"]
    starts, _, per_host_peak = await _run_in_slots(throttle, urls, hold=0.4)
    gaps = _gaps(starts, "http://a.example:80")
    assert len(gaps) == 3 and min(gaps) >= 0.14
    assert per_host_peak["http://a.example:80"] == 2  # the hold (0.4 s) outlasts the delay
    first_a = min(t for k, t in starts if k == "http://a.example:80")
    first_b = next(t for k, t in starts if k == "http://b.example:80")
    assert abs(first_b - first_a) < 0.1  # another host is not delayed


async def test_throttle_global_limit() -> None:
    throttle = HostThrottle(per_host_concurrency=5, min_delay_seconds=0.0, global_concurrency=2)
    urls = [f"http://h{i}.example/" for i in range(6)]
    started = time.monotonic()
    _, peak, _ = await _run_in_slots(throttle, urls, hold=0.1)
    assert peak == 2
    assert time.monotonic() - started >= 0.29  # three waves of two


async def test_throttle_robots_delay_and_override() -> None:
    throttle = HostThrottle(per_host_concurrency=1, min_delay_seconds=0.0, global_concurrency=4)
    throttle.set_host_delay("http://slow.example/robots.txt", 0.2)
    assert throttle.host_delay("http://slow.example:80") == 0.2
    assert throttle.host_delay("http://slow.example:80", delay_override=0.5) == 0.5
    assert throttle.host_delay("http://fast.example:80") == 0.0
    throttle.set_host_delay("http://capped.example/", 3600)
    assert throttle.host_delay("http://capped.example/") == 60.0
    starts, _, _ = await _run_in_slots(throttle, ["http://slow.example/1", "http://slow.example/2"], hold=0)
    assert _gaps(starts, "http://slow.example:80")[0] >= 0.19


async def test_throttle_with_fetcher_against_site(site: FixtureSite, tmp_path: Path) -> None:
    fetcher = Crawl4aiHttpFetcher(_settings(tmp_path))
    throttle = HostThrottle(per_host_concurrency=2, min_delay_seconds=0.3, global_concurrency=4)

    async def polite_fetch(path: str) -> int:
        async with throttle.slot(site.url_for(path)):
            return (await fetcher.fetch(site.url_for(path))).status

    try:
        statuses = await asyncio.gather(*(polite_fetch(p) for p in ["/docs/a", "/docs/b", "/docs/c"]))
    finally:
        await fetcher.close()
    assert statuses == [200, 200, 200]
    times = sorted(record.time for record in site.request_log)
    assert len(times) == 3
    # arrival times jitter under load (the exact spacing of starts is tested above): check the span,
    # and give each gap slack (the first request also opens the connection, so it can arrive late)
    assert times[-1] - times[0] >= 0.5
    assert min(b - a for a, b in zip(times, times[1:], strict=False)) >= 0.15


# --------------------------------------------------------------------------- fetcher


def _settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"crawl_allow_private": True, "data_dir": tmp_path, "crawl_page_timeout": 5.0}
    values.update(overrides)
    return Settings(_env_file=None, **values)


FetcherFactory = Callable[..., Awaitable[Crawl4aiHttpFetcher]]


@pytest.fixture
async def make_fetcher(tmp_path: Path) -> AsyncIterator[FetcherFactory]:
    """Build fetchers on explicit test settings; closes them afterwards."""
    created: list[Crawl4aiHttpFetcher] = []

    async def build(**overrides: Any) -> Crawl4aiHttpFetcher:
        built = Crawl4aiHttpFetcher(_settings(tmp_path, **overrides))
        created.append(built)
        return built

    yield build
    for built in created:
        await built.close()


@pytest.fixture
async def fetcher(make_fetcher: FetcherFactory) -> Crawl4aiHttpFetcher:
    return await make_fetcher()


async def test_html_page_to_markdown_title_links(fetcher: Crawl4aiHttpFetcher, site: FixtureSite) -> None:
    result = await fetcher.fetch(site.url_for("/docs/a"))
    assert result.ok and result.status == 200 and result.error is None
    assert result.final_url == site.url_for("/docs/a")
    assert result.content_type == "text/html"
    assert result.title == "Brewing Espresso"
    assert "# Brewing Espresso" in result.markdown
    assert "nine bars of pressure" in result.markdown
    assert "Varroa" not in result.markdown
    assert result.links == [site.url_for("/docs/b"), site.url_for("/")]
    assert result.etag == site.pages["/docs/a"].etag
    assert result.last_modified == FIXED_LAST_MODIFIED
    assert result.raw is None and not result.not_modified
    assert site.requests_for("/docs/a")[0].headers["user-agent"] == UA


async def test_home_links_are_absolute_normalised_and_unique(fetcher: Crawl4aiHttpFetcher, site: FixtureSite) -> None:
    site.set_page(
        "/links",
        "<html><head><title>Links</title></head><body><p>Many links here.</p>"
        '<a href="docs/a#intro">A</a><a href="/docs/a">A again</a><a href="HTTP://EXAMPLE.invalid:80/x">X</a>'
        '<a href="./deep/../deep/1">deep</a><a href="mailto:a@b.example">mail</a>'
        '<a href="javascript:void(0)">js</a><a href="#top">top</a></body></html>',
    )
    result = await fetcher.fetch(site.url_for("/links"))
    assert result.links == [  # document order
        site.url_for("/docs/a"),
        "http://example.invalid/x",
        site.url_for("/deep/1"),
        site.url_for("/links"),
    ]

    home = await fetcher.fetch(site.url + "/")
    assert home.title == "Fixture Handbook Home"
    assert set(home.links) == {normalize_url(href, site.url) for href in DEFAULT_LINKS}
    assert "http://example.invalid/x" in home.links


@pytest.mark.parametrize("status", [404, 410])
async def test_not_found_and_gone(fetcher: Crawl4aiHttpFetcher, site: FixtureSite, status: int) -> None:
    path = "/missing" if status == 404 else "/gone"
    if status == 410:
        site.set_page("/gone", "<html><body>gone</body></html>", status=410)
    result = await fetcher.fetch(site.url_for(path))
    assert (result.status, result.error, result.markdown, result.ok) == (status, f"HTTP {status}", "", False)


async def test_removed_page_becomes_404(fetcher: Crawl4aiHttpFetcher, site: FixtureSite) -> None:
    assert (await fetcher.fetch(site.url_for("/docs/b"))).status == 200
    site.remove_page("/docs/b")
    assert (await fetcher.fetch(site.url_for("/docs/b"))).status == 404


async def test_conditional_requests(fetcher: Crawl4aiHttpFetcher, site: FixtureSite) -> None:
    url = site.url_for("/docs/b")
    first = await fetcher.fetch(url)
    assert first.status == 200 and first.etag

    by_etag = await fetcher.fetch(url, etag=first.etag, last_modified=first.last_modified)
    assert (by_etag.status, by_etag.not_modified, by_etag.etag, by_etag.error) == (304, True, first.etag, None)
    assert by_etag.markdown == ""
    sent = site.requests_for("/docs/b")[1].headers
    assert sent["if-none-match"] == first.etag and sent["if-modified-since"] == FIXED_LAST_MODIFIED

    by_date = await fetcher.fetch(url, last_modified=first.last_modified)
    assert (by_date.status, by_date.not_modified, by_date.last_modified) == (304, True, FIXED_LAST_MODIFIED)

    site.set_page("/docs/b", "<html><head><title>Bees v2</title></head><body><p>Queen cells.</p></body></html>")
    changed = await fetcher.fetch(url, etag=first.etag)
    assert (changed.status, changed.not_modified, changed.title) == (200, False, "Bees v2")
    assert changed.etag != first.etag and "Queen cells." in changed.markdown


async def test_redirect_followed(fetcher: Crawl4aiHttpFetcher, site: FixtureSite) -> None:
    result = await fetcher.fetch(site.url_for("/redirect"))
    assert result.url == site.url_for("/redirect")
    assert result.final_url == site.url_for("/docs/c")
    assert (result.status, result.title) == (200, "Lighthouse Maintenance")
    assert "Fresnel lens" in result.markdown
    assert [r.path for r in site.request_log] == ["/redirect", "/docs/c"]


async def test_redirect_loop_stops(fetcher: Crawl4aiHttpFetcher, site: FixtureSite) -> None:
    site.set_redirect("/loop", "/loop", status=301)
    result = await fetcher.fetch(site.url_for("/loop"))
    assert (result.status, result.error) == (0, "too many redirects")
    assert len(site.requests_for("/loop")) == 6


async def test_private_site_refused_without_allow_private(make_fetcher: FetcherFactory, site: FixtureSite) -> None:
    strict = await make_fetcher(crawl_allow_private=False)
    result = await strict.fetch(site.url_for("/docs/a"))
    assert result.status == 0 and not result.ok
    assert result.error is not None and "loopback" in result.error
    assert site.request_log == []  # no request reached the private server


async def test_redirect_to_private_address_refused(
    make_fetcher: FetcherFactory, site: FixtureSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Treat the fixture's address as public, so only the redirect hop hits the real guard."""
    real_class = safety.address_class

    def fixture_is_public(address: Any) -> str | None:
        return None if str(address) == site.host else real_class(address)

    monkeypatch.setattr(safety, "address_class", fixture_is_public)
    strict = await make_fetcher(crawl_allow_private=False)
    site.set_redirect("/to-metadata", "http://169.254.169.254/latest/meta-data/")
    result = await strict.fetch(site.url_for("/to-metadata"))
    assert result.status == 0
    assert result.final_url == "http://169.254.169.254/latest/meta-data/"
    assert result.error is not None and "cloud metadata" in result.error

    site.set_redirect("/to-ftp", "ftp://files.example/x")
    bad_scheme = await strict.fetch(site.url_for("/to-ftp"))
    assert (bad_scheme.status, bad_scheme.error) == (302, "bad redirect location: ftp://files.example/x")

    allowed = await strict.fetch(site.url_for("/redirect"))
    assert (allowed.status, allowed.final_url) == (200, site.url_for("/docs/c"))


async def test_non_text_content_refused(fetcher: Crawl4aiHttpFetcher, site: FixtureSite) -> None:
    result = await fetcher.fetch(site.url_for("/files/data.bin"))
    assert (result.status, result.error) == (200, "non-text content: application/octet-stream")
    assert (result.markdown, result.raw, result.ok) == ("", None, False)


async def test_markdown_plain_text_and_pdf(fetcher: Crawl4aiHttpFetcher, site: FixtureSite) -> None:
    site.set_page("/notes.md", "# Field Notes\n\nSee [espresso](/docs/a).\n", "text/markdown; charset=utf-8")
    site.set_page("/notes.txt", "Plain words, no markup.\n", "text/plain")
    pdf_bytes = b"%PDF-1.4\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n"
    site.set_page("/paper.pdf", pdf_bytes, "application/pdf")

    markdown = await fetcher.fetch(site.url_for("/notes.md"))
    assert (markdown.status, markdown.content_type, markdown.title) == (200, "text/markdown", "Field Notes")
    assert markdown.markdown == "# Field Notes\n\nSee [espresso](/docs/a)."
    assert markdown.links == [site.url_for("/docs/a")]

    text = await fetcher.fetch(site.url_for("/notes.txt"))
    assert (text.markdown, text.title, text.links, text.ok) == ("Plain words, no markup.", None, [], True)

    pdf = await fetcher.fetch(site.url_for("/paper.pdf"))
    assert (pdf.status, pdf.content_type, pdf.raw, pdf.markdown, pdf.ok) == (
        200,
        "application/pdf",
        pdf_bytes,
        "",
        True,
    )


async def test_charset_from_meta(fetcher: Crawl4aiHttpFetcher, site: FixtureSite) -> None:
    html = "<html><head><meta charset='windows-1252'><title>Café</title></head><body><p>Crème brûlée.</p></body></html>"
    site.set_page("/cafe", html.encode("cp1252"), "text/html")
    result = await fetcher.fetch(site.url_for("/cafe"))
    assert result.title == "Café" and "Crème brûlée." in result.markdown


async def test_page_timeout(make_fetcher: FetcherFactory, site: FixtureSite) -> None:
    quick = await make_fetcher(crawl_page_timeout=1.0)
    started = time.monotonic()
    result = await quick.fetch(site.url_for("/slow"))
    elapsed = time.monotonic() - started
    assert (result.status, result.error, result.ok) == (0, "timeout", False)
    assert 0.9 <= elapsed < 2.0


@pytest.mark.parametrize("send_length", [True, False])
async def test_max_page_bytes(make_fetcher: FetcherFactory, site: FixtureSite, send_length: bool) -> None:
    small = await make_fetcher(crawl_max_page_bytes=5_000)
    paragraphs = "".join(f"<p>Paragraph {i} about nothing in particular.</p>" for i in range(400))
    site.set_page("/big", f"<html><body>{paragraphs}</body></html>", send_length=send_length)
    result = await small.fetch(site.url_for("/big"))
    assert result.status == 200 and result.markdown == "" and not result.ok
    assert result.error is not None and result.error.startswith("too large")
    assert "5000" in result.error
    fits = await small.fetch(site.url_for("/docs/a"))
    assert fits.ok


def test_create_fetcher_and_crawl4ai_home(tmp_path: Path) -> None:
    http_fetcher = create_fetcher(_settings(tmp_path))
    assert isinstance(http_fetcher, Crawl4aiHttpFetcher)
    assert os.environ["CRAWL4_AI_BASE_DIRECTORY"] == str(tmp_path / "crawl4ai")
    assert http_fetcher.paths.downloads == tmp_path / "crawl4ai" / "downloads"
    assert http_fetcher.paths.downloads.is_dir()

    from services.fetchers.browser import BrowserFetcher

    browser_fetcher = create_fetcher(_settings(tmp_path, crawl_browser=True))
    assert isinstance(browser_fetcher, BrowserFetcher)


async def test_generated_site_for_benchmarks(fetcher: Crawl4aiHttpFetcher, site: FixtureSite) -> None:
    urls = site.generate(500)
    assert len(urls) == 500 and urls[0] == site.url_for("/gen/0")
    index = await fetcher.fetch(site.url_for("/gen/"))
    assert index.links == [site.url_for("/gen/0")]
    page = await fetcher.fetch(site.url_for("/gen/3"))
    assert "gentoken3" in page.markdown and page.title == "Generated page 3"
    children = {site.url_for(f"/gen/{i}") for i in range(16, 21)}
    assert children | {site.url_for("/gen/0"), site.url_for("/gen/4")} == set(page.links)


async def test_unreachable_server_is_a_network_error(fetcher: Crawl4aiHttpFetcher) -> None:
    stopped = FixtureSite(with_defaults=False).start()
    url = stopped.url_for("/docs/a")
    stopped.stop()
    result = await fetcher.fetch(url)
    assert result.status == 0 and result.error is not None and result.error.startswith("network error")


def test_browser_status_normalisation() -> None:
    from types import SimpleNamespace

    from services.fetchers.browser import crawl_result_status

    assert crawl_result_status(SimpleNamespace(status_code=404, error_message="")) == 404
    assert crawl_result_status(SimpleNamespace(status_code=None, error_message="HTTP 410: Unexpected status")) == 410
    assert crawl_result_status(SimpleNamespace(status_code=None, error_message="net::ERR_NAME_NOT_RESOLVED")) == 0


async def test_browser_request_guard_aborts_private_requests(tmp_path: Path, site: FixtureSite) -> None:
    """The route answers requests itself (pinned client) or aborts them; Chromium never connects."""
    from types import SimpleNamespace

    from services.fetchers.browser import BrowserFetcher

    calls: list[tuple[str, Any]] = []

    class FakeRoute:
        def __init__(self, url: str) -> None:
            self.request = SimpleNamespace(url=url, method="GET", headers={}, post_data_buffer=None)

        async def abort(self, reason: str) -> None:
            calls.append(("abort", self.request.url))

        async def fulfill(self, *, status: int, headers: dict[str, str], body: bytes) -> None:
            calls.append(("fulfill", status))

    class FakeContext:
        handler: Any = None

        async def route(self, pattern: str, handler: Any) -> None:
            self.handler = handler

    strict = BrowserFetcher(_settings(tmp_path, crawl_allow_private=False, crawl_browser=True))
    trusting = BrowserFetcher(_settings(tmp_path, crawl_allow_private=True, crawl_browser=True))
    strict_context, trusting_context = FakeContext(), FakeContext()
    await strict._guard_requests(page=None, context=strict_context)
    await trusting._guard_requests(page=None, context=trusting_context)
    for url in ["http://169.254.169.254/latest", site.url_for("/docs/a"), "data:text/plain,hi", "file:///etc/passwd"]:
        await strict_context.handler(FakeRoute(url))
    await trusting_context.handler(FakeRoute(site.url_for("/docs/a")))
    await strict.close()
    await trusting.close()
    assert calls == [
        ("abort", "http://169.254.169.254/latest"),
        ("abort", site.url_for("/docs/a")),
        ("abort", "data:text/plain,hi"),
        ("abort", "file:///etc/passwd"),
        ("fulfill", 200),
    ]
