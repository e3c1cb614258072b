"""A mutable fixture website served from the test process on 127.0.0.1 (ephemeral port).

`FixtureSite` runs a threaded `http.server` in a background thread, so it never blocks the asyncio
loop of the test that crawls it. Pages can be added, changed and removed while it runs; every request
is recorded in `request_log` as `(path, time, headers)` with `time.monotonic()` times and lower-cased
header names. HTML pages carry ETag and Last-Modified headers and answer conditional requests with 304.

Default content (see `DEFAULT_LINKS` and `install_defaults`):

- `/` links to /docs/a, /docs/b, /archive/old, /private/secret, /missing (404), /slow (3 s),
  http://example.invalid/x, /files/data.bin (application/octet-stream), /redirect (302 to /docs/c)
  and /deep/1 (chain /deep/1 -> /deep/2 -> /deep/3 -> /deep/4);
- /docs/a and /docs/b link to each other; every page has distinct topical text;
- /robots.txt disallows /private/ and names /sitemap.xml, which lists /sitemap-only (linked from
  nowhere) among others; /llms.txt links to the two docs pages.

`generate(n)` adds a large site under /gen/ for benchmarks. Use it as a context manager, or through
the function-scoped `fixture_site` pytest fixture.
"""

from __future__ import annotations

import hashlib
import logging
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import pytest

logger = logging.getLogger(__name__)

HTML = "text/html; charset=utf-8"
FIXED_LAST_MODIFIED = formatdate(1_700_000_000, usegmt=True)  # Tue, 14 Nov 2023 22:13:20 GMT
SLOW_SECONDS = 3.0
DEFAULT_LINKS = [
    "/docs/a",
    "/docs/b",
    "/archive/old",
    "/private/secret",
    "/missing",
    "/slow",
    "http://example.invalid/x",
    "/files/data.bin",
    "/redirect",
    "/deep/1",
]


class RequestRecord(NamedTuple):
    """One request the site received."""

    path: str  # path and query as requested
    time: float  # time.monotonic() when the request line was read
    headers: dict[str, str]  # lower-cased names


@dataclass
class Page:
    """One resource the site serves."""

    body: bytes
    content_type: str = HTML
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    send_length: bool = True  # False: no Content-Length, body ends when the connection closes
    last_modified: str = FIXED_LAST_MODIFIED

    @property
    def etag(self) -> str:
        return '"' + hashlib.sha256(self.body).hexdigest()[:16] + '"'


def html_page(title: str, paragraphs: list[str], links: list[tuple[str, str]] | None = None) -> str:
    """A small but realistic HTML document."""
    body = "\n".join(f"<p>{text}</p>" for text in paragraphs)
    items = "\n".join(f'<li><a href="{href}">{text}</a></li>' for href, text in links or [])
    nav = f"<nav><ul>\n{items}\n</ul></nav>" if links else ""
    return (
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{title}</title></head>\n"
        f"<body>\n<h1>{title}</h1>\n{body}\n{nav}\n<footer>Fixture Handbook</footer>\n</body></html>\n"
    )


TOPICS: dict[str, tuple[str, list[str]]] = {
    "/docs/a": (
        "Brewing Espresso",
        [
            "Espresso extraction forces hot water through finely ground coffee at about nine bars of "
            "pressure. A balanced shot takes twenty-five to thirty seconds and yields a syrupy body "
            "crowned with hazelnut crema.",
            "Grind size is the main lever: a finer grind slows the flow and increases extraction, while a "
            "coarser grind speeds it up and produces sour, thin shots. Adjust in small steps.",
            "Dose and ratio matter too. Eighteen grams of coffee in, thirty-six grams of espresso out is a "
            "common starting recipe for a double ristretto-leaning shot.",
        ],
    ),
    "/docs/b": (
        "Tending Honeybees",
        [
            "A healthy honeybee colony in summer holds tens of thousands of workers, a few hundred drones "
            "and a single laying queen. Beekeepers inspect brood frames every week or two.",
            "Varroa mites are the beekeeper's main enemy. Sugar-roll counts in late summer tell whether "
            "an oxalic acid treatment is needed before the winter cluster forms.",
            "Harvest honey only from supers above the queen excluder, and leave enough stores in the "
            "brood box for the colony to survive until the spring nectar flow.",
        ],
    ),
    "/docs/c": (
        "Lighthouse Maintenance",
        [
            "Keepers once trimmed wicks and polished the Fresnel lens every evening so the beam carried "
            "twenty nautical miles across the shipping lane.",
            "Modern automated lighthouses use LED lanterns, solar panels and remote monitoring, but the "
            "lantern room glazing still needs cleaning after every storm season.",
        ],
    ),
    "/archive/old": (
        "Steam Locomotive History",
        [
            "The Stephenson Rocket of 1829 combined a multi-tube boiler with a blast pipe, the design that "
            "shaped steam locomotives for more than a century.",
            "Articulated giants such as the Union Pacific Big Boy hauled freight over the Wasatch range "
            "until diesel-electric traction replaced steam in the 1950s.",
        ],
    ),
    "/private/secret": (
        "Secret Sourdough Formula",
        [
            "This page is disallowed by robots.txt: a polite crawler never fetches the hydration ratio of "
            "the secret sourdough levain kept here.",
        ],
    ),
    "/sitemap-only": (
        "Tide Pool Creatures",
        [
            "Rocky tide pools shelter sea anemones, ochre sea stars, hermit crabs and sculpins that "
            "survive the daily cycle of exposure and submersion.",
            "This page is linked from no other page; only the sitemap lists it.",
        ],
    ),
    "/slow": (
        "Patience Exercises",
        ["This page answers slowly so timeouts can be tested against a sluggish server."],
    ),
    "/deep/1": (
        "Volcano Formation",
        ["Stratovolcanoes build steep cones from alternating layers of lava, ash and pumice above subduction zones."],
    ),
    "/deep/2": (
        "Glacier Dynamics",
        [
            "Glaciers flow under their own weight; crevasses open where the ice accelerates over a "
            "steepening bedrock step."
        ],
    ),
    "/deep/3": (
        "Coral Reef Ecology",
        [
            "Reef-building corals host symbiotic zooxanthellae whose photosynthesis feeds the polyp and "
            "colours the reef."
        ],
    ),
    "/deep/4": (
        "Aurora Physics",
        [
            "Auroras glow when solar wind particles funnelled by the magnetosphere excite oxygen and "
            "nitrogen high in the thermosphere."
        ],
    ),
}

PAGE_LINKS: dict[str, list[tuple[str, str]]] = {
    "/docs/a": [("/docs/b", "Tending Honeybees"), ("/", "Home")],
    "/docs/b": [("/docs/a", "Brewing Espresso"), ("/", "Home")],
    "/deep/1": [("/deep/2", "Deeper: glaciers")],
    "/deep/2": [("/deep/3", "Deeper: coral reefs")],
    "/deep/3": [("/deep/4", "Deeper: auroras")],
}

_WORDS = (
    "archive atlas beacon canyon cipher delta ember fjord galaxy harbor island jasmine kestrel lagoon "
    "meadow nebula orchard prism quartz river summit tundra umbra valley willow xenon yonder zephyr"
).split()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    site: FixtureSite

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("fixture site: connection error from %s", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 5  # idle keep-alive connections end after this many seconds
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature of the base class
        logger.debug("fixture site: " + format, *args)

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        self._respond(send_body=True)

    def do_HEAD(self) -> None:  # noqa: N802 - http.server naming
        self._respond(send_body=False)

    def _respond(self, send_body: bool) -> None:
        site = self.server.site
        site.record(self.path, {k.lower(): v for k, v in self.headers.items()})
        page = site.lookup(self.path)
        if page.delay:
            site.wait(page.delay)
        if page.status == 200 and site.is_not_modified(page, self.headers):
            self._send_head(304, page, length=None)
            return
        self._send_head(page.status, page, length=len(page.body) if page.send_length else None)
        if send_body:
            self.wfile.write(page.body)
        if not page.send_length:
            self.close_connection = True

    def _send_head(self, status: int, page: Page, length: int | None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", page.content_type)
        if status in (200, 304):
            self.send_header("ETag", page.etag)
            self.send_header("Last-Modified", page.last_modified)
        for name, value in page.headers.items():
            self.send_header(name, value)
        if status == 304:
            self.send_header("Content-Length", "0")
        elif length is not None:
            self.send_header("Content-Length", str(length))
        else:
            self.send_header("Connection", "close")
        self.end_headers()


class FixtureSite:
    """A mutable website on 127.0.0.1; see the module docstring for the default pages."""

    def __init__(self, *, with_defaults: bool = True, host: str = "127.0.0.1") -> None:
        self.host = host
        self.pages: dict[str, Page] = {}
        self.request_log: list[RequestRecord] = []
        self._with_defaults = with_defaults
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---
    def start(self) -> FixtureSite:
        """Bind an ephemeral port, install the default pages and serve in a background thread."""
        self._server = _Server((self.host, 0), _Handler)
        self._server.site = self
        if self._with_defaults:
            self.install_defaults()
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fixture-site", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; slow handlers are woken up so nothing lingers."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FixtureSite:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the site first"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Base URL without a trailing slash, e.g. http://127.0.0.1:40123."""
        return f"http://{self.host}:{self.port}"

    def url_for(self, path: str) -> str:
        return self.url + path

    # --- content ---
    def set_page(
        self,
        path: str,
        body: str | bytes,
        content_type: str = HTML,
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        send_length: bool = True,
        last_modified: str = FIXED_LAST_MODIFIED,
    ) -> None:
        """Serve `body` at `path` (replacing any page there)."""
        data = body.encode("utf-8") if isinstance(body, str) else body
        page = Page(data, content_type, status, dict(headers or {}), delay, send_length, last_modified)
        with self._lock:
            self.pages[path] = page

    def set_redirect(self, path: str, location: str, status: int = 302) -> None:
        """Redirect `path` to `location` (relative or absolute)."""
        self.set_page(path, b"", "text/plain", status=status, headers={"Location": location})

    def remove_page(self, path: str) -> None:
        """Stop serving `path`: it answers 404 from now on."""
        with self._lock:
            self.pages.pop(path, None)

    def set_delay(self, path: str, seconds: float) -> None:
        """Make `path` wait `seconds` before answering."""
        with self._lock:
            self.pages[path].delay = seconds

    def install_defaults(self) -> None:
        """The default site described in the module docstring."""
        home_links = [(href, href.strip("/") or "home") for href in DEFAULT_LINKS]
        self.set_page(
            "/",
            html_page(
                "Fixture Handbook Home",
                [
                    "Welcome to the Fixture Handbook, a small website for testing the crawler. It covers "
                    "espresso brewing, beekeeping, lighthouses and locomotives."
                ],
                home_links,
            ),
        )
        for path, (title, paragraphs) in TOPICS.items():
            self.set_page(path, html_page(title, paragraphs, PAGE_LINKS.get(path, [])))
        self.set_delay("/slow", SLOW_SECONDS)
        self.set_redirect("/redirect", "/docs/c")
        self.set_page("/files/data.bin", bytes(range(256)) * 64, "application/octet-stream")
        self.set_page("/robots.txt", self.robots_txt(), "text/plain")
        self.set_page("/sitemap.xml", self.sitemap_xml(["/", "/docs/a", "/docs/b", "/sitemap-only"]), "application/xml")
        self.set_page(
            "/llms.txt",
            "# Fixture Handbook\n\n> Test site.\n\n## Docs\n\n"
            "- [Brewing Espresso](/docs/a): extraction basics\n"
            "- [Tending Honeybees](/docs/b): colony care\n",
            "text/plain",
        )

    def robots_txt(self, extra: str = "") -> str:
        return f"User-agent: *\nDisallow: /private/\n{extra}\nSitemap: {self.url}/sitemap.xml\n"

    def sitemap_xml(self, paths: list[str]) -> str:
        entries = "\n".join(f"  <url><loc>{self.url}{path}</loc></url>" for path in paths)
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n{entries}\n</urlset>\n'
        )

    def generate(self, n_pages: int, *, prefix: str = "/gen/", fanout: int = 5, seed: int = 7) -> list[str]:
        """Add `n_pages` pages `<prefix><i>` forming a `fanout`-ary tree (plus parent and sibling links).

        The index `<prefix>` links to page 0. Each page has a unique token "gentoken<i>" and a few
        paragraphs of deterministic pseudo-text. Returns the page URLs.
        """
        rng = random.Random(seed)
        urls = []
        for i in range(n_pages):
            children = [c for c in range(fanout * i + 1, fanout * i + fanout + 1) if c < n_pages]
            related = children + [(i - 1) // fanout if i else 0, (i + 1) % n_pages]
            links = [(f"{prefix}{j}", f"Page {j}") for j in dict.fromkeys(related)]
            paragraphs = [
                f"Generated page {i} carries the unique token gentoken{i}. "
                + " ".join(rng.choice(_WORDS) for _ in range(60))
                for _ in range(3)
            ]
            self.set_page(f"{prefix}{i}", html_page(f"Generated page {i}", paragraphs, links))
            urls.append(self.url_for(f"{prefix}{i}"))
        self.set_page(prefix, html_page("Generated index", ["Start here."], [(f"{prefix}0", "Page 0")]))
        return urls

    # --- used by the handler thread ---
    def record(self, path: str, headers: dict[str, str]) -> None:
        with self._lock:
            self.request_log.append(RequestRecord(path, time.monotonic(), headers))

    def lookup(self, raw_path: str) -> Page:
        path = urlsplit(raw_path).path or "/"
        with self._lock:
            page = self.pages.get(raw_path) or self.pages.get(path)
        if page is None:
            return Page(b"<html><body><h1>Not Found</h1></body></html>", HTML, status=404)
        return page

    def wait(self, seconds: float) -> None:
        """Sleep, but return at once when the site stops."""
        self._stopping.wait(seconds)

    @staticmethod
    def is_not_modified(page: Page, headers: Any) -> bool:
        """RFC 9110: If-None-Match wins; otherwise compare If-Modified-Since with Last-Modified."""
        if_none_match = headers.get("If-None-Match")
        if if_none_match is not None:
            return page.etag in [tag.strip() for tag in if_none_match.split(",")] or if_none_match == "*"
        if_modified_since = headers.get("If-Modified-Since")
        if not if_modified_since:
            return False
        try:
            return parsedate_to_datetime(page.last_modified) <= parsedate_to_datetime(if_modified_since)
        except (TypeError, ValueError):
            return False

    # --- assertions helpers ---
    def requests_for(self, path: str) -> list[RequestRecord]:
        """Logged requests whose path (without query) is `path`."""
        with self._lock:
            return [r for r in self.request_log if urlsplit(r.path).path == path]


@pytest.fixture
def fixture_site() -> Iterator[FixtureSite]:
    """A fresh fixture website per test, stopped afterwards."""
    site = FixtureSite().start()
    try:
        yield site
    finally:
        site.stop()
