"""search_type="web" through a real MCP client, against a local server speaking SearXNG's JSON API
(and one that fails, refuses JSON or answers too slowly): results as {title, url, content, engine},
SearXNG's suggestions, categories checked against ARCHIVIST_SEARXNG_CATEGORIES, the server's default count."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.app import Runtime
from services.core.settings import Settings
from tests.conftest import make_settings
from tests.support.mcp_helpers import client_in_own_task, err, ok

RESULTS = [
    {"title": "Tide - Wikipedia", "url": "https://en.wikipedia.org/wiki/Tide", "content": "Tides are the rise "
     "and fall of sea levels caused by the Moon.", "engine": "wikipedia", "score": 3.0},
    {"title": "Tide tables", "url": "https://tides.example.org/", "content": "Tide tables for 2026.",
     "engine": "duckduckgo"},
    {"title": "No URL", "content": "skipped"},
    {"title": "FTP", "url": "ftp://example.org/tides", "content": "skipped too", "engine": "x"},
    {"title": "Spring tides", "url": "https://example.com/spring", "content": "", "engine": "brave"},
]  # fmt: skip
SUGGESTIONS = ["tide tables", "spring tide", 7, "", "neap tide"]


class FakeSearxng:
    """SearXNG's /search?format=json on 127.0.0.1; `mode` switches how it answers."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.requests: list[dict[str, list[str]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:  # noqa: N802
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                fake.requests.append(query)
                if fake.mode == "slow":
                    time.sleep(1.5)
                reply = {"query": query.get("q", [""])[0], "results": RESULTS, "suggestions": SUGGESTIONS}
                status, body, kind = 200, json.dumps(reply), "json"
                if parts.path != "/search":
                    status, body = 404, "{}"
                elif fake.mode == "fail":
                    status, body = 500, "Internal Server Error"
                elif query.get("format") != ["json"] or fake.mode == "no-json":
                    status, body, kind = 403, "Forbidden", "html"
                data = body.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json" if kind == "json" else "text/html")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting (timeout test)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture(scope="module")
def searxng() -> Iterator[FakeSearxng]:
    fake = FakeSearxng()
    fake.thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


@pytest_asyncio.fixture(scope="module")
async def client(database_url: str, files_dir: Path, embedder: Any, searxng: FakeSearxng) -> AsyncIterator[Client]:
    settings = make_settings(
        database_url,
        files_dir,
        searxng_url=searxng.url + "/",
        searxng_timeout_ms=500,
        searxng_max_results=2,
        searxng_categories=["general", "news", "it"],
    )
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as connected:
        yield connected


@pytest_asyncio.fixture(scope="module")
async def unconfigured(settings: Settings, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as connected:
        yield connected


async def test_web_results_from_searxng(client: Client, searxng: FakeSearxng) -> None:
    searxng.mode = "ok"
    payload = await ok(client, "search_knowledge_base", query="spring tides", search_type="web", match_count=2,
                       language="en")  # fmt: skip
    assert (payload["search_type"], payload["query"], payload["count"]) == ("web", "spring tides", 2)
    assert payload["results"] == [
        {"title": "Tide - Wikipedia", "url": "https://en.wikipedia.org/wiki/Tide",
         "content": "Tides are the rise and fall of sea levels caused by the Moon.", "engine": "wikipedia",
         "match_type": "web"},
        {"title": "Tide tables", "url": "https://tides.example.org/", "content": "Tide tables for 2026.",
         "engine": "duckduckgo", "match_type": "web"},
    ]  # fmt: skip
    assert payload["suggestions"] == ["tide tables", "spring tide", "neap tide"]  # strings only
    assert "crawl_website" in payload["hint"]
    sent = searxng.requests[-1]
    assert (sent["q"], sent["format"], sent["language"]) == (["spring tides"], ["json"], ["en"])
    assert "categories" not in sent

    every = await ok(client, "search_knowledge_base", query="tides", search_type="web", match_count=5)
    assert [r["url"] for r in every["results"]] == [RESULTS[0]["url"], RESULTS[1]["url"], RESULTS[4]["url"]]
    assert "language" not in searxng.requests[-1]


async def test_web_categories_and_default_count(client: Client, searxng: FakeSearxng) -> None:
    """categories go to SearXNG as its comma-separated parameter, only names on the server's list; a
    call without match_count gets ARCHIVIST_SEARXNG_MAX_RESULTS results (2 here, of 3 usable)."""
    searxng.mode = "ok"
    payload = await ok(client, "search_knowledge_base", query="tides", search_type="web",
                       categories=["news", "it", "news"])  # fmt: skip
    assert payload["search_type"] == "web" and payload["count"] == 2
    assert searxng.requests[-1]["categories"] == ["news,it"]
    before = len(searxng.requests)
    refused = await err(client, "search_knowledge_base", "INVALID_ARGUMENT", query="tides", search_type="web",
                        categories=["general", "torrents"])  # fmt: skip
    assert "torrents" in refused["error"] and "general, news, it" in refused["suggestion"]
    assert len(searxng.requests) == before  # refused before asking the instance
    await err(client, "search_knowledge_base", "INVALID_ARGUMENT", query="tides", categories=["news"],
              search_type="hybrid")  # fmt: skip


async def test_web_search_failures_are_unavailable_and_retryable(client: Client, searxng: FakeSearxng) -> None:
    try:
        for mode in ("fail", "slow"):
            searxng.mode = mode
            began = time.monotonic()
            payload = await err(client, "search_knowledge_base", "UNAVAILABLE", query="tides", search_type="web")
            assert payload["retryable"] is True, payload
            assert time.monotonic() - began < 1.4  # the 500 ms timeout, not the instance's 1.5 s
        assert "500 ms" in payload["error"]
        searxng.mode = "no-json"
        refused = await err(client, "search_knowledge_base", "UNAVAILABLE", query="tides", search_type="web")
        assert "formats: [html, json]" in refused["suggestion"]
    finally:
        searxng.mode = "ok"


async def test_web_search_arguments_checked(client: Client) -> None:
    await err(client, "search_knowledge_base", "INVALID_ARGUMENT", query="tides", search_type="web", source_id="x")
    await err(client, "search_knowledge_base", "INVALID_ARGUMENT", query="tides", language="en")
    await err(client, "search_knowledge_base", "INVALID_ARGUMENT", query="tides", search_type="web", language="e n")


async def test_web_search_off_names_the_setting(unconfigured: Client) -> None:
    payload = await err(unconfigured, "search_knowledge_base", "INVALID_ARGUMENT", query="tides", search_type="web")
    assert "ARCHIVIST_SEARXNG_URL" in payload["error"] and "ARCHIVIST_SEARXNG_URL" in payload["suggestion"]
    assert payload["retryable"] is False
