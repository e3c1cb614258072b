"""A document's links: written whenever it is stored (crawled pages, and ingested markdown and HTML
text and files), read back within the caller's scope, and its one-hop page graph.

Links are stored by target URL (sql/002_links.sql) and resolved to documents when read: to a document
with that URL in any source the caller may see, its own source first. A link to a document outside
the scope reads exactly like a link to no document (`document_id` null, no graph node), and backlinks
count only documents in scope, so nothing is learned about other tenants' sources.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg

from services.access.scope import Scope

#: document types whose stored content holds its links (HTML keeps them beside: NewDocument.links)
LINKED_TYPES = frozenset({"markdown"})
#: nodes of a page graph: the document and at most 19 neighbours
MAX_GRAPH_NODES = 20
TITLE_LIMIT = 200

#: $1 a URL, $2 the caller's sources (NULL: every source), $3 the linking document's source (preferred)
RESOLVE = (
    "SELECT id, title, url FROM documents d WHERE d.url = {url} AND ($2::uuid[] IS NULL OR d.source_id = ANY($2)) "
    "ORDER BY (d.source_id = {source}) DESC, d.created_at, d.id LIMIT 1"
)
OUTLINKS = (
    "SELECT l.to_url AS url, t.id AS document_id, t.title FROM document_links l "
    f"LEFT JOIN LATERAL ({RESOLVE.format(url='l.to_url', source='l.source_id')}) t ON true "
    "WHERE l.from_document_id = $1 ORDER BY (t.id IS NULL), l.to_url LIMIT $3"
)
BACKLINKS = (
    "SELECT d.url, d.id AS document_id, d.title FROM document_links l JOIN documents d ON d.id = l.from_document_id "
    "WHERE l.to_url = $1 AND ($2::uuid[] IS NULL OR d.source_id = ANY($2)) AND d.id <> $4 "
    "ORDER BY (d.source_id = $5) DESC, d.url, d.id LIMIT $3"
)
BACKLINK_COUNT = (
    "SELECT count(*) FROM document_links l JOIN documents d ON d.id = l.from_document_id "
    "WHERE l.to_url = $1 AND ($2::uuid[] IS NULL OR d.source_id = ANY($2)) AND d.id <> $3"
)
#: links among a graph's nodes: $1 node ids, $2 the caller's sources
EDGES = (
    "SELECT l.from_document_id AS source, t.id AS target FROM document_links l "
    f"JOIN LATERAL ({RESOLVE.format(url='l.to_url', source='l.source_id')}) t ON true "
    "WHERE l.from_document_id = ANY($1::uuid[]) AND t.id = ANY($1::uuid[]) AND t.id <> l.from_document_id"
)


def content_links(content: str, document_type: str, url: str | None) -> list[str] | None:
    """The links written in a document's content (markdown: resolved against its URL), or None when
    its type keeps none there (its links, if any, come from elsewhere: an HTML file's parser)."""
    if document_type not in LINKED_TYPES:
        return None
    from services.pages.links import markdown_links  # the page pipeline (lxml) loads on first use, not at start

    return markdown_links(content, url)


async def write_links(conn: asyncpg.Connection, document_id: UUID, source_id: UUID, urls: list[str]) -> None:
    """Replace a document's outlinks (absolute, normalised URLs), in the caller's transaction."""
    await conn.execute("DELETE FROM document_links WHERE from_document_id = $1", document_id)
    await conn.executemany(
        "INSERT INTO document_links (from_document_id, source_id, to_url) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        [(document_id, source_id, u) for u in dict.fromkeys(urls)],
    )


def _sources(scope: Scope) -> list[UUID] | None:
    return None if scope.source_ids is None else sorted(scope.source_ids)


def _cut(title: str | None) -> str | None:
    return title if title is None or len(title) <= TITLE_LIMIT else title[: TITLE_LIMIT - 1] + "…"


async def scoped_links(pool: asyncpg.Pool, document_id: UUID, scope: Scope, limit: int = 20) -> dict[str, Any] | None:
    """Outlinks (resolved within `scope`) and backlinks (from documents in `scope`) of a document the
    caller may see; None when it has neither."""
    sources = _sources(scope)
    async with pool.acquire() as conn:
        doc = await conn.fetchrow("SELECT source_id, url FROM documents WHERE id = $1", document_id)
        out_total = await conn.fetchval("SELECT count(*) FROM document_links WHERE from_document_id = $1", document_id)
        back_total = 0
        if doc["url"]:
            back_total = await conn.fetchval(BACKLINK_COUNT, doc["url"], sources, document_id)
        if not out_total and not back_total:
            return None
        outlinks = await conn.fetch(OUTLINKS, document_id, sources, limit)
        backlinks = []
        if back_total:
            backlinks = await conn.fetch(BACKLINKS, doc["url"], sources, limit, document_id, doc["source_id"])
    return {
        "outlinks": [{**dict(r), "title": _cut(r["title"])} for r in outlinks],
        "outlinks_total": out_total,
        "backlinks": [{**dict(r), "title": _cut(r["title"])} for r in backlinks],
        "backlinks_total": back_total,
    }


async def link_graph(pool: asyncpg.Pool, document_id: UUID, scope: Scope) -> dict[str, Any]:
    """The one-hop page graph of a document the caller may see: it, the documents it links to and the
    documents linking to it (in scope, at most MAX_GRAPH_NODES nodes in all), and every link among them.
    Nodes carry `connections`: their number of edges inside this graph."""
    sources = _sources(scope)
    room = MAX_GRAPH_NODES - 1
    async with pool.acquire() as conn:
        doc = await conn.fetchrow("SELECT id, source_id, title, url FROM documents WHERE id = $1", document_id)
        outlinks = await conn.fetch(OUTLINKS, document_id, sources, room + 1)
        backlinks = []
        if doc["url"]:
            backlinks = await conn.fetch(BACKLINKS, doc["url"], sources, room + 1, document_id, doc["source_id"])
        nodes = {doc["id"]: {"id": doc["id"], "title": _cut(doc["title"]), "url": doc["url"]}}
        for row in [*[r for r in outlinks if r["document_id"] is not None], *backlinks]:
            node = {"id": row["document_id"], "title": _cut(row["title"]), "url": row["url"]}
            nodes.setdefault(row["document_id"], node)
        cut = len(nodes) > MAX_GRAPH_NODES
        kept = dict(list(nodes.items())[:MAX_GRAPH_NODES])
        edges = await conn.fetch(EDGES, list(kept), sources)
    pairs = sorted({(r["source"], r["target"]) for r in edges}, key=lambda p: (str(p[0]), str(p[1])))
    degree: dict[UUID, int] = dict.fromkeys(kept, 0)
    for source, target in pairs:
        degree[source] += 1
        degree[target] += 1
    return {
        "nodes": [{**node, "connections": degree[node_id]} for node_id, node in kept.items()],
        "edges": [{"source": s, "target": t} for s, t in pairs],
        "truncated": cut,
    }
