"""Documentation behind a login (issue 19, point 3) and what manage_source get shows (point 4).

A fixture site on 127.0.0.1 answers 401 without the Authorization header and 403 without the session
cookie. Another site on 127.0.0.2 (another host name) records every request: a page of the first site
redirects there and its sitemap does too, so any header or cookie that follows a hop to another host
shows up in its log. The secret values never reach the database, the job status, the audit log or the
logs: only the variable names do.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import pytest_asyncio

from models.jobs import CrawlJob, CrawlRequest
from server import build_server
from services.app import Archivist, Runtime, run_worker
from services.core.errors import InvalidArgument
from services.crawl.robots_cache import RobotsCache
from services.fetchers.browser_guard import RequestGuard
from tests.conftest import make_settings
from tests.support.fixture_site import FixtureSite, Page, html_page
from tests.support.mcp_helpers import client_in_own_task, err, ok
from tools.crawl_website import job_view
from web import create_web_app

TOKEN_VAR, COOKIE_VAR = "DOCS_TOKEN", "DOCS_COOKIE"
HEADERS = {"Authorization": f"env:{TOKEN_VAR}"}
COOKIES = {"session": f"env:{COOKIE_VAR}"}


class LoginSite(FixtureSite):
    """A fixture site that answers 401 without the bearer token and 403 without the session cookie."""

    def __init__(self, token: str, cookie: str) -> None:
        super().__init__(with_defaults=False)
        self.token, self.cookie = token, cookie
        self._current = threading.local()  # the headers of the request this handler thread serves

    def record(self, path: str, headers: dict[str, str]) -> None:
        super().record(path, headers)
        self._current.headers = headers

    def lookup(self, raw_path: str) -> Page:
        headers: dict[str, str] = getattr(self._current, "headers", {})
        if headers.get("authorization") != self.token:
            return Page(b"login required", "text/plain", status=401)
        if f"session={self.cookie}" not in [c.strip() for c in headers.get("cookie", "").split(";")]:
            return Page(b"session required", "text/plain", status=403)
        return super().lookup(raw_path)


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {TOKEN_VAR: f"Bearer tok-{uuid.uuid4().hex}", COOKIE_VAR: f"cookie-{uuid.uuid4().hex}"}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
def other() -> Iterator[FixtureSite]:
    """Another host (127.0.0.2): records whatever it is sent."""
    with FixtureSite(with_defaults=False, host="127.0.0.2") as site:
        site.set_page("/stolen", html_page("Elsewhere", ["A page on another host."]))
        site.set_page("/robots.txt", "User-agent: *\nAllow: /\n", "text/plain")
        site.set_page("/sitemap.xml", site.sitemap_xml(["/from-sitemap"]), "application/xml")
        yield site


@pytest.fixture
def site(secrets: dict[str, str], other: FixtureSite) -> Iterator[LoginSite]:
    with LoginSite(secrets[TOKEN_VAR], secrets[COOKIE_VAR]) as login_site:
        links = [("/docs/a", "Espresso"), ("/docs/b", "Bees"), ("/leak", "Elsewhere")]
        login_site.set_page("/", html_page("Members Handbook", ["Only for members who signed in."], links))
        login_site.set_page("/docs/a", html_page("Brewing Espresso", ["Nine bars of pressure, a syrupy shot."]))
        login_site.set_page("/docs/b", html_page("Tending Honeybees", ["Inspect brood frames every week."]))
        login_site.set_redirect("/leak", other.url_for("/stolen"))
        login_site.set_page("/robots.txt", login_site.robots_txt(), "text/plain")
        login_site.set_redirect("/sitemap.xml", other.url_for("/sitemap.xml"))  # a discovery hop to another host
        yield login_site


@pytest_asyncio.fixture(scope="module")
async def login_app(database_url: str, files_dir: Path, embedder: Any) -> AsyncIterator[Archivist]:
    settings = make_settings(  # a job no worker here can honour fails after 2 s (test_a_missing_variable_is_named)
        database_url,
        files_dir,
        crawl_delay_seconds=0,
        crawl_page_timeout=2.0,
        job_poll_seconds=0.1,
        job_unhonoured_seconds=2.0,
    )
    app = await Archivist.open(settings, embedder)
    yield app
    await app.close()


async def run_until_finished(app: Archivist, job_id: uuid.UUID, timeout: float = 60.0) -> CrawlJob:
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(app, stop, "login-test"))
    try:
        job = await app.jobs.wait(job_id, timeout, interval=0.1)
    finally:
        stop.set()
        await task
    assert job.finished, job
    return job


def paths(site: FixtureSite, authorized: bool | None = None) -> set[str]:
    """Paths requested (with the login when `authorized` is True, without it when False)."""
    return {
        urlsplit(r.path).path
        for r in site.request_log
        if authorized is None or ("authorization" in r.headers and "cookie" in r.headers) == authorized
    }


def assert_no_login(site: FixtureSite) -> None:
    for record in site.request_log:
        assert "authorization" not in record.headers and "cookie" not in record.headers, record


async def database_text(app: Archivist) -> str:
    """Every table a secret could leak into, as text."""
    parts = []
    for table in ("crawl_jobs", "crawl_frontier", "sources", "documents", "audit_log"):
        rows = await app.db.pool.fetch(f"SELECT t::text AS row FROM {table} t")
        parts.extend(r["row"] for r in rows)
    return "\n".join(parts)


def assert_secret_free(text: str, secrets: dict[str, str]) -> None:
    for value in secrets.values():
        assert value not in text and value.split()[-1] not in text


@pytest.mark.usefixtures("owner")
async def test_login_goes_to_the_start_host_only(
    login_app: Archivist, site: LoginSite, other: FixtureSite, secrets: dict[str, str], caplog: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    refused = await login_app.crawl.start(
        CrawlRequest(url=site.url_for("/"), title="Members (no login)", recursive=True)
    )
    assert (await run_until_finished(login_app, refused.job.id)).status == "failed"  # 401: the site is closed

    started = await login_app.crawl.start(
        CrawlRequest(url=site.url_for("/"), title="Members", recursive=True, headers=HEADERS, cookies=COOKIES)
    )
    job = await run_until_finished(login_app, started.job.id)
    assert job.status == "completed" and job.documents_created == 3, job
    assert {"/", "/docs/a", "/docs/b", "/robots.txt", "/leak", "/sitemap.xml"} <= paths(site, authorized=True)
    assert {"/stolen", "/sitemap.xml"} <= paths(other)  # the redirects were followed...
    assert_no_login(other)  # ...without the login
    assert job.params.headers == HEADERS and job.params.cookies == COOKIES
    view = json.dumps(job_view(job), default=str)
    assert f"env:{TOKEN_VAR}" in view
    assert_secret_free(view, secrets)
    assert_secret_free(await database_text(login_app), secrets)
    assert_secret_free(caplog.text, secrets)


@pytest.mark.usefixtures("owner")
async def test_robots_and_browser_requests_carry_the_login_only_to_its_host(
    login_app: Archivist, site: LoginSite, other: FixtureSite, secrets: dict[str, str]
) -> None:
    from services.net.credentials import resolve, same_host  # here: the module imports on main (each test fails)

    login = resolve(site.url_for("/"), HEADERS, COOKIES, [])
    assert login is not None and secrets[TOKEN_VAR] not in repr(login)
    robots = RobotsCache(login_app.settings, login_app.crawl.throttle, [], login)
    await robots.policy(site.url_for("/docs/a"))
    await robots.policy(other.url_for("/stolen"))
    assert "/robots.txt" in paths(site, authorized=True) and "/robots.txt" in paths(other)

    guard = RequestGuard(login_app.settings, login)  # the browser's network: every request goes through it
    try:
        status, _, body = await guard.fetch("GET", site.url_for("/docs/a"), {"authorization": "page's own"}, None)
        assert status == 200 and b"Espresso" in body
        status, _, _ = await guard.fetch("GET", site.url_for("/leak"), {}, None)
        assert status == 200 and "/stolen" in paths(other)
    finally:
        await guard.close()
    assert_no_login(other)

    upgraded = resolve("https://docs.example/", HEADERS, {}, ["api.example:8443"])
    assert upgraded is not None
    assert upgraded.for_url("https://DOCS.example:443/x") and upgraded.for_url("https://api.example:8443/")
    for elsewhere in (
        "http://docs.example/",
        "https://docs.example:8443/",
        "https://api.example/",
        "https://x.example/",
    ):
        assert upgraded.for_url(elsewhere) == {}, elsewhere  # no downgrade to http, no other port or host
    assert same_host("https://docs.example/a", "https://DOCS.example:443/b")  # a recrawl there keeps its login
    assert not same_host("https://docs.example/", "http://docs.example/")  # not on a move to plain http


@pytest.mark.usefixtures("owner")
async def test_recrawl_reuses_the_references(
    login_app: Archivist, site: LoginSite, other: FixtureSite, secrets: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    started = await login_app.crawl.start(
        CrawlRequest(url=site.url_for("/"), title="Members recrawl", headers=HEADERS, cookies=COOKIES)
    )
    assert (await run_until_finished(login_app, started.job.id)).status == "completed"

    rotated = f"Bearer rotated-{uuid.uuid4().hex}"  # read from the environment at each run, never stored
    monkeypatch.setenv(TOKEN_VAR, rotated)
    site.token = rotated
    site.set_page("/", html_page("Members Handbook", ["Changed for members only."]))
    again = await login_app.crawl.recrawl(CrawlRequest(source_id=started.job.source_id))
    job = await run_until_finished(login_app, again.job.id)
    assert job.status == "completed" and job.documents_updated == 1, job
    assert job.params.headers == HEADERS and job.params.cookies == COOKIES

    moved = await login_app.crawl.recrawl(CrawlRequest(source_id=started.job.source_id, url=other.url_for("/stolen")))
    assert moved.job.params.headers == {} and moved.job.params.cookies == {} and "another host" in moved.notes[-1]
    await run_until_finished(login_app, moved.job.id)
    assert "/stolen" in paths(other)
    assert_no_login(other)  # a recrawl moved to another host does not take the login along
    assert_secret_free(await database_text(login_app), {**secrets, "rotated": rotated})


@pytest.mark.usefixtures("owner")
async def test_a_missing_variable_is_named(
    login_app: Archivist, site: LoginSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(COOKIE_VAR)
    with pytest.raises(InvalidArgument, match=COOKIE_VAR):
        await login_app.crawl.start(
            CrawlRequest(url=site.url_for("/"), title="Members missing", headers=HEADERS, cookies=COOKIES)
        )

    monkeypatch.setenv(COOKIE_VAR, "set-when-queued")
    started = await login_app.crawl.start(
        CrawlRequest(url=site.url_for("/"), title="Members missing", headers=HEADERS, cookies=COOKIES)
    )
    monkeypatch.delenv(COOKIE_VAR)  # gone before a worker starts the job: no worker holds it, none claims it
    job = await run_until_finished(login_app, started.job.id)  # failed once it waited job_unhonoured_seconds
    assert job.status == "failed" and job.pages_crawled == 0, job
    assert f"secret variables set: {COOKIE_VAR}, {TOKEN_VAR}" in (job.error or ""), job.error  # queued with both
    assert f"secret variables set: {TOKEN_VAR} (not {COOKIE_VAR})" in (job.error or ""), job.error  # this worker
    with pytest.raises(InvalidArgument, match=COOKIE_VAR):
        await login_app.crawl.recrawl(CrawlRequest(source_id=started.job.source_id))


async def test_literal_values_are_refused_without_being_echoed(login_app: Archivist, site: LoginSite) -> None:
    literal = f"Bearer literal-{uuid.uuid4().hex}"
    for headers, cookies in (
        ({"Authorization": literal}, None),
        (None, {"session": literal}),
        ({"Authorization": "env:docs_token"}, None),  # upper case names only
        ({"Authorization": "env:DATABASE_URL"}, None),  # the server's own secrets are never sent
        ({"Cookie": "env:DOCS_COOKIE"}, None),  # cookies go in cookies=
    ):
        with pytest.raises(InvalidArgument) as refused:
            await login_app.crawl.start(CrawlRequest(url=site.url_for("/"), headers=headers, cookies=cookies))
        assert literal not in refused.value.message + refused.value.suggestion


@pytest_asyncio.fixture
async def client(login_app: Archivist, embedder: Any) -> AsyncIterator[Any]:
    runtime = Runtime(login_app.settings, embedder=embedder)
    server = build_server(login_app.settings, runtime=runtime, run_worker=False)
    async with client_in_own_task(server) as mcp_client:
        yield mcp_client
    await runtime.close()


@pytest.mark.usefixtures("owner")
async def test_source_get_and_console_show_kind_origin_and_variable_names(
    login_app: Archivist, client: Any, site: LoginSite, secrets: dict[str, str], files_dir: Path
) -> None:
    literal = f"Bearer literal-{uuid.uuid4().hex}"
    plain = f"plain-{uuid.uuid4().hex}"
    for headers in ({"X-Key": literal}, {"Authorization": plain}):
        refused = await err(client, "crawl_website", "INVALID_ARGUMENT", url=site.url_for("/"), headers=headers)
        assert literal not in json.dumps(refused) and plain not in json.dumps(refused)
    started = await ok(
        client, "crawl_website", url=site.url_for("/"), title="Members shown", headers=HEADERS, cookies=COOKIES
    )
    job = await run_until_finished(login_app, uuid.UUID(started["crawl_job"]["id"]))
    status = await ok(client, "crawl_website", action="status", job_id=str(job.id))
    source = (await ok(client, "manage_source", action="get", source_id=started["source_id"]))["source"]
    assert source["kind"] == "crawl" and source["origin"] == site.url_for("/")
    assert source["login"] == {
        "headers": {"Authorization": TOKEN_VAR},
        "cookies": {"session": COOKIE_VAR},
        "auth_hosts": [],
    }
    await asyncio.sleep(1.5)  # the audit log is written in the background
    assert await login_app.db.pool.fetchval("SELECT count(*) FROM audit_log WHERE tool = 'crawl_website'") >= 4
    shown = json.dumps([started, status, source]) + await database_text(login_app)
    assert_secret_free(shown, {**secrets, "literal": literal, "plain": plain})

    notes = files_dir / "notes"
    notes.mkdir(exist_ok=True)
    folder, _ = await login_app.sync.bind(str(notes), title="Notes folder")
    spec = (await login_app.sources.create("Pets API", source_type="upload")).id
    await login_app.documents.create_from_text(
        spec,
        "# Pets API\n\nAn overview.",
        "Pets API",
        "https://api.example/openapi.json#overview",
        {"openapi_kind": "overview", "openapi_version": "3.1.0", "api_title": "Pets API", "api_version": "2.0"},
    )
    git = await login_app.sources.create("Handbook repo", url="https://git.example/org/handbook.git", source_type="git")
    await login_app.db.pool.execute(
        "INSERT INTO source_git (source_id, url, ref, last_commit) VALUES ($1, $2, 'main', $3)",
        git.id,
        git.url,
        "a" * 40,
    )
    views = {}
    for sid in (folder.source_id, spec, git.id):
        views[sid] = (await ok(client, "manage_source", action="get", source_id=str(sid)))["source"]
    assert views[folder.source_id]["kind"] == "folder" and views[folder.source_id]["origin"] == str(notes.resolve())
    assert views[spec]["kind"] == "openapi" and views[spec]["spec_version"] == "3.1.0"
    assert views[spec]["origin"] == "https://api.example/openapi.json"
    assert views[git.id]["kind"] == "git" and views[git.id]["last_synced_commit"] == "a" * 40

    runtime = Runtime(login_app.settings, embedder=login_app.embedder)
    transport = httpx.ASGITransport(
        create_web_app(runtime, login_app.settings, "127.0.0.1"), client=("127.0.0.1", 4000)
    )
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as browser:
        page = (await browser.get(f"/sources/{started['source_id']}")).text
        assert TOKEN_VAR in page and COOKIE_VAR in page and site.url_for("/") in page and ">crawl<" in page
        assert_secret_free(page, secrets)
        assert "aaaaaaaaaaaa" in (await browser.get(f"/sources/{git.id}")).text
        assert "OpenAPI 3.1.0" in (await browser.get(f"/sources/{spec}")).text
    await runtime.close()


CHROMIUM = "/usr/bin/chromium"
APP_JS = """
const p = document.createElement("p");
p.textContent = "Rendered by script for members: the hive ledger lists every frame inspection.";
document.querySelector("main, article, body").appendChild(p);
"""


@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"no Chromium at {CHROMIUM}")
@pytest.mark.usefixtures("owner")
async def test_browser_fetcher_sends_the_login_to_its_host_only(
    tmp_path: Path, site: LoginSite, other: FixtureSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    from services.core.settings import Settings
    from services.fetchers.browser import BrowserFetcher

    for name in ("CRAWL4_AI_BASE_DIRECTORY", "CRAWL4AI_CHROMIUM_SANDBOX"):  # the fetcher sets them
        monkeypatch.setenv(name, os.environ.get(name, ""))
    page = html_page("Members Hive Ledger", ["Colonies are inspected weekly by members who signed in."])
    extra = (
        f'<img src="{other.url_for("/pixel.png")}"><img src="/leak"><script src="/app.js"></script>'
        f'<script>fetch("{other.url_for("/xhr")}").catch(() => null);</script>'
    )
    site.set_page("/app", page.replace("</body>", extra + "</body>"))
    site.set_page("/app.js", APP_JS, "application/javascript")
    settings = Settings(
        _env_file=None,
        data_dir=tmp_path,
        crawl_allow_private=True,
        crawl_browser=True,
        crawl_browser_path=CHROMIUM,
        crawl_page_timeout=30.0,
    )
    from services.net.credentials import resolve

    login = resolve(site.url_for("/app"), HEADERS, COOKIES, [])
    fetcher = BrowserFetcher(settings, login)
    try:
        result = await fetcher.fetch(site.url_for("/app"))
        await asyncio.sleep(1.0)  # late image/fetch() requests arrive now
    finally:
        await fetcher.close()
    assert result.ok and "Rendered by script for members" in result.markdown, result
    assert "/app.js" in paths(site, authorized=True)
    assert {"/pixel.png", "/stolen"} <= paths(other), other.request_log  # the page reached the other host...
    assert_no_login(other)  # ...without the login
