"""Web search through a SearXNG instance (`search_type="web"`, off unless ARCHIVIST_SEARXNG_URL is set).

One GET of SearXNG's JSON API, `/search?q=...&format=json[&language=...][&categories=...]`, whose reply
is `{"results": [{"title", "url", "content", "engine", ...}, ...], "suggestions": [...]}`: each result is
passed on as {title, url, content, engine} (the chat module's shape), with the instance's suggestions.
`categories` must be among ARCHIVIST_SEARXNG_CATEGORIES; a call without match_count gets
ARCHIVIST_SEARXNG_MAX_RESULTS results. Results are not stored: an agent
that wants a page in the knowledge base crawls it (crawl_website). The instance is the operator's own
(loopback or LAN), so its address is not put through the crawler's SSRF check.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

import httpx

from services.core.errors import InvalidArgument, Unavailable
from services.core.settings import Settings
from services.core.validation import MAX_PER_PAGE

logger = logging.getLogger(__name__)

SNIPPET_LIMIT = 1000
TITLE_LIMIT = 200
LANGUAGE = re.compile(r"^(all|auto|[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})?)$")
SETTING = "ARCHIVIST_SEARXNG_URL"
MAX_SUGGESTIONS = 10


@dataclass
class WebResult:
    title: str
    url: str
    content: str  # the instance's snippet of the page
    engine: str | None


@dataclass
class WebAnswer:
    results: list[WebResult]
    suggestions: list[str]


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_language(language: str | None) -> str | None:
    if language is None or language == "":
        return None
    if not LANGUAGE.match(language):
        raise InvalidArgument(
            f"Invalid language '{language[:40]}'.", "Use a language code such as 'en', 'de' or 'pt-BR', or 'all'."
        )
    return language


def check_categories(categories: list[str] | None, allowed: list[str]) -> list[str]:
    """The named categories, each one of `allowed` (ARCHIVIST_SEARXNG_CATEGORIES), de-duplicated."""
    if not categories:
        return []
    if isinstance(categories, str) or len(categories) > len(allowed):
        raise InvalidArgument("categories must be a list of category names.", f"Use some of: {', '.join(allowed)}.")
    unknown = [str(c)[:40] for c in categories if c not in allowed]
    if unknown:
        raise InvalidArgument(
            f"Unknown web search categor{'y' if len(unknown) == 1 else 'ies'}: {', '.join(unknown)}.",
            f"Use some of: {', '.join(allowed)} (ARCHIVIST_SEARXNG_CATEGORIES on the server).",
        )
    return list(dict.fromkeys(categories))


def parse_suggestions(body: Any) -> list[str]:
    """SearXNG's `suggestions` (related searches), strings only, cut, at most MAX_SUGGESTIONS."""
    items = body.get("suggestions") if isinstance(body, dict) else None
    if not isinstance(items, list):
        return []
    return [_cut(item, TITLE_LIMIT) for item in items if isinstance(item, str) and item.strip()][:MAX_SUGGESTIONS]


def parse_results(body: Any, limit: int) -> list[WebResult]:
    """SearXNG's `results`, those with an http(s) URL, first `limit`; odd entries are skipped."""
    items = body.get("results") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise Unavailable("The SearXNG instance answered without a results list.", "Check ARCHIVIST_SEARXNG_URL.")
    results: list[WebResult] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        url = item.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            continue
        engine = item.get("engine")
        results.append(
            WebResult(
                title=_cut(str(item.get("title") or url), TITLE_LIMIT),
                url=url,
                content=_cut(str(item.get("content") or ""), SNIPPET_LIMIT),
                engine=str(engine) if engine else None,
            )
        )
        if len(results) >= limit:
            break
    return results


async def web_search(
    settings: Settings, query: str, match_count: int, language: str | None, categories: list[str] | None = None
) -> WebAnswer:
    """Ask the configured SearXNG instance; INVALID_ARGUMENT when none is, UNAVAILABLE (retryable)
    when it fails, times out or does not answer JSON."""
    base = (settings.searxng_url or "").strip()
    if not base:
        raise InvalidArgument(
            f"Web search is off: {SETTING} is not set on the server.",
            f"Set {SETTING} to a SearXNG instance (docs/tools.md), or search the knowledge base "
            "with search_type='hybrid'.",
        )
    if not query or not query.strip():
        raise InvalidArgument("query must not be empty.", "Pass the words to search the web for.")
    params = {"q": query.strip(), "format": "json"}
    lang = check_language(language)
    if lang:
        params["language"] = lang
    chosen = check_categories(categories, settings.searxng_categories)
    if chosen:
        params["categories"] = ",".join(chosen)
    timeout = settings.searxng_timeout_ms / 1000
    url = base.rstrip("/") + "/search"
    try:
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False) as client:
            response = await client.get(url, params=params, headers={"Accept": "application/json"})
    except httpx.TimeoutException:
        raise Unavailable(
            f"The SearXNG instance did not answer within {settings.searxng_timeout_ms} ms.",
            "Retry; if it keeps happening, raise ARCHIVIST_SEARXNG_TIMEOUT_MS or check the instance.",
        ) from None
    except httpx.HTTPError as exc:
        logger.warning("SearXNG at %s failed: %s", url, exc)
        raise Unavailable(
            f"The SearXNG instance could not be reached ({type(exc).__name__}).", f"Check {SETTING} and retry."
        ) from None
    if response.status_code == 403:
        raise Unavailable(
            "The SearXNG instance refused the JSON format (HTTP 403).",
            "Add json to `search: formats: [html, json]` in its settings.yml and restart it.",
            retryable=False,
        )
    if response.status_code != 200:
        raise Unavailable(
            f"The SearXNG instance answered HTTP {response.status_code}.", "Retry in a moment; check the instance."
        )
    try:
        body = response.json()
    except ValueError:
        raise Unavailable(
            "The SearXNG instance did not answer JSON.", "Enable `formats: [html, json]` in its settings.yml."
        ) from None
    return WebAnswer(parse_results(body, min(max(match_count, 1), MAX_PER_PAGE)), parse_suggestions(body))
