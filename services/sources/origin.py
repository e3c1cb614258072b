"""Where a source's documents come from, as manage_source get and the console's source page show it.

One small reply for every kind: `kind` (crawl, folder, git, openapi, upload, api), `origin` (the start
URL, the folder's path, the repository's URL) and what was last synced (a git commit, a spec's
version). A crawl behind a login shows its header and cookie names with the environment variables
they come from, never a value: only the references are stored (services/net/credentials.py).
"""

from __future__ import annotations

from typing import Any

import asyncpg

from models import Source
from models.jobs import CrawlParams
from services.jobs.sources import latest_crawl
from services.net.credentials import variable_names

MAX_SPECS = 5


async def _git(pool: asyncpg.Pool, source: Source) -> dict[str, Any] | None:
    row = await pool.fetchrow(
        "SELECT url, ref, last_commit, last_synced_at, auth_env FROM source_git WHERE source_id = $1", source.id
    )
    if row is None:
        return None
    return {
        "kind": "git",
        "origin": row["url"],
        "ref": row["ref"],
        "last_synced_commit": row["last_commit"],
        "last_synced_at": row["last_synced_at"],
        "auth_env": row["auth_env"],
    }


async def _folder(pool: asyncpg.Pool, source: Source) -> dict[str, Any] | None:
    path = await pool.fetchval("SELECT path FROM source_folders WHERE source_id = $1", source.id)
    return None if path is None else {"kind": "folder", "origin": path}


async def _crawl(pool: asyncpg.Pool, source: Source) -> dict[str, Any] | None:
    row = await latest_crawl(pool, source.id)
    if row is None:
        return {"kind": "crawl", "origin": source.url} if source.source_type == "crawl" else None
    params = CrawlParams(**row["params"])
    view: dict[str, Any] = {"kind": "crawl", "origin": params.url, "last_crawled_at": row["completed_at"]}
    if params.headers or params.cookies:
        view["login"] = {
            "headers": variable_names(params.headers),  # header name -> environment variable name
            "cookies": variable_names(params.cookies),
            "auth_hosts": params.auth_hosts,
        }
    return view


async def _specs(pool: asyncpg.Pool, source: Source) -> list[dict[str, Any]]:
    rows = await pool.fetch(
        "SELECT url, metadata->>'api_title' AS title, metadata->>'openapi_version' AS spec_version, "
        "metadata->>'api_version' AS api_version FROM documents "
        "WHERE source_id = $1 AND metadata->>'openapi_kind' = 'overview' ORDER BY created_at LIMIT $2",
        source.id,
        MAX_SPECS,
    )
    return [{**dict(r), "url": (r["url"] or "").removesuffix("#overview") or None} for r in rows]


async def describe(pool: asyncpg.Pool, source: Source) -> dict[str, Any]:
    """{kind, origin, ...}: what the source follows and how far it got (no secret, only names)."""
    view = await _git(pool, source) or await _folder(pool, source) or await _crawl(pool, source)
    specs = await _specs(pool, source)
    if view is None:
        kind = "openapi" if specs and source.source_type in ("upload", "api") else source.source_type
        view = {"kind": kind, "origin": specs[0]["url"] if kind == "openapi" else source.url}
    if specs:
        view["spec_version"] = specs[0]["spec_version"]
        view["specs"] = specs
    return view
