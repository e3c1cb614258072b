"""Issue 32.7, the page graph of the NEXUS endpoint, through real MCP clients: links extracted from
markdown and HTML when text and files are ingested (not only when crawled), `manage_document get` with
`graph=true` (a one-hop graph of at most 20 nodes, scoped: a link to a document outside the caller's
profile reads as missing) and `order="newest"` on document lists."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
from mcp import Client

from server import build_server
from services.app import Runtime
from services.core.settings import Settings
from tests.support.mcp_helpers import client_in_own_task, err, ok

KB = "https://kb.example"


@pytest_asyncio.fixture(scope="module")
async def owner(settings: Settings, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as client:
        yield client


async def add(client: Client, source_id: str, title: str, url: str | None, content: str) -> str:
    created = await ok(
        client, "manage_document", action="create", source_id=source_id, title=title, url=url, content=content
    )
    return created["document"]["id"]


@pytest_asyncio.fixture(scope="module")
async def world(owner: Client, app: Any, files_dir: Path) -> dict[str, str]:
    """Source A: one -> two, three, secret (in B), nowhere; two -> one. Source B: secret -> one.
    A folder (source F) of a markdown file linking its neighbour and an HTML file linking it."""
    ids: dict[str, str] = {}
    for key in ("A", "B"):
        ids[key] = (await ok(owner, "manage_source", action="create", title=f"Graph {key}"))["source"]["id"]
    one = f"# One\n\nSee [two](two), [three]({KB}/three#top), [the secret]({KB}/secret) and [gone]({KB}/nowhere)."
    ids["one"] = await add(owner, ids["A"], "One", f"{KB}/one", one)
    ids["two"] = await add(owner, ids["A"], "Two", f"{KB}/two", "Back to [one](one).")
    ids["three"] = await add(owner, ids["A"], "Three", f"{KB}/three", "A leaf page with no links at all.")
    ids["secret"] = await add(owner, ids["B"], "Secret", f"{KB}/secret", "Salaries; see [one](/one).")
    folder = files_dir / "graph"
    folder.mkdir()
    (folder / "guide.md").write_text("# Guide\n\nRead the [glossary](glossary.md) first.")
    (folder / "glossary.md").write_text("# Glossary\n\nTerms, defined.")
    (folder / "index.html").write_text(
        "<html><head><title>Index</title></head><body><main><h1>Index</h1><p>Start with the "
        '<a href="guide.md">guide</a>, or the <a href="https://kb.example/one">web page</a>.</p></main></body></html>'
    )
    created = await ok(owner, "manage_document", action="create", title="Graph F", file_path=str(folder))
    ids["F"] = created["source_id"]
    for doc in created["documents"]:
        ids[Path(doc["path"]).name] = doc["id"]
    await app.profiles.create("graph-a", "A and the folder", [ids["A"], ids["F"]])
    return ids


def by_url(links: list[dict[str, Any]]) -> dict[str, Any]:
    return {link["url"]: link["document_id"] for link in links}


async def test_links_from_ingested_text_resolve_across_sources(owner: Client, world: dict[str, str]) -> None:
    got = await ok(owner, "manage_document", action="get", document_id=world["one"])
    assert by_url(got["links"]["outlinks"]) == {
        f"{KB}/two": world["two"],
        f"{KB}/three": world["three"],
        f"{KB}/secret": world["secret"],  # the owner sees every source
        f"{KB}/nowhere": None,
    }
    assert {b["document_id"] for b in got["links"]["backlinks"]} == {world["two"], world["secret"], world["index.html"]}
    assert "graph" not in got  # opt-in

    graph = (await ok(owner, "manage_document", action="get", document_id=world["one"], graph=True))["graph"]
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert set(nodes) == {world[k] for k in ("one", "two", "three", "secret", "index.html")}
    edges = {(e["source"], e["target"]) for e in graph["edges"]}
    assert edges == {
        (world["one"], world["two"]),
        (world["two"], world["one"]),
        (world["one"], world["three"]),
        (world["one"], world["secret"]),
        (world["secret"], world["one"]),
        (world["index.html"], world["one"]),
    }
    assert nodes[world["one"]]["connections"] == 6 and nodes[world["three"]]["connections"] == 1
    assert graph["truncated"] is False and nodes[world["two"]]["title"] == "Two"


async def test_links_from_ingested_files(owner: Client, world: dict[str, str]) -> None:
    """A markdown file's relative link names its neighbour; an HTML file's links survive its conversion."""
    guide = await ok(owner, "manage_document", action="get", document_id=world["guide.md"], graph=True)
    assert [o["document_id"] for o in guide["links"]["outlinks"]] == [world["glossary.md"]]
    assert [b["document_id"] for b in guide["links"]["backlinks"]] == [world["index.html"]]
    assert {n["id"] for n in guide["graph"]["nodes"]} == {world["guide.md"], world["glossary.md"], world["index.html"]}
    index = await ok(owner, "manage_document", action="get", document_id=world["index.html"])
    assert set(by_url(index["links"]["outlinks"]).values()) >= {world["guide.md"], world["one"]}


async def test_graph_is_scoped_to_the_profile(settings: Settings, embedder: Any, world: dict[str, str]) -> None:
    """A tenant confined to profile graph-a (A and the folder): the link to B's page reads exactly like a
    link to no page, B's backlink is not counted, and B's page is no node."""
    server = build_server(
        settings, runtime=Runtime(settings, embedder=embedder), run_worker=False, profiles=["graph-a"]
    )
    async with client_in_own_task(server) as tenant:
        got = await ok(tenant, "manage_document", action="get", document_id=world["one"], graph=True)
        outlinks = {o["url"]: o for o in got["links"]["outlinks"]}
        assert outlinks[f"{KB}/secret"] == {**outlinks[f"{KB}/nowhere"], "url": f"{KB}/secret"}
        assert outlinks[f"{KB}/secret"]["document_id"] is None and outlinks[f"{KB}/secret"]["title"] is None
        assert got["links"]["backlinks_total"] == 2  # two and the folder's index, not B's page
        ids = {n["id"] for n in got["graph"]["nodes"]}
        assert world["secret"] not in ids and ids == {world[k] for k in ("one", "two", "three", "index.html")}
        assert all(world["secret"] not in (e["source"], e["target"]) for e in got["graph"]["edges"])
        await err(tenant, "manage_document", "NOT_FOUND", action="get", document_id=world["secret"], graph=True)


async def test_graph_holds_at_most_20_nodes_and_updates_replace_links(owner: Client, world: dict[str, str]) -> None:
    hub_source = (await ok(owner, "manage_source", action="create", title="Graph hub"))["source"]["id"]
    for n in range(24):
        await add(owner, hub_source, f"Leaf {n}", f"{KB}/leaf/{n}", f"Leaf number {n} of the hub.")
    links = " ".join(f"[leaf {n}](leaf/{n})" for n in range(24))
    hub = await add(owner, hub_source, "Hub", f"{KB}/hub", f"# Hub\n\n{links}")
    got = await ok(owner, "manage_document", action="get", document_id=hub, graph=True)
    assert len(got["graph"]["nodes"]) == 20 and got["graph"]["truncated"] is True
    assert got["links"]["outlinks_total"] == 24 and len(got["links"]["outlinks"]) == 20
    await ok(owner, "manage_document", action="update", document_id=hub, content="# Hub\n\nOnly [leaf 3](leaf/3) now.")
    again = await ok(owner, "manage_document", action="get", document_id=hub, graph=True)
    assert [o["url"] for o in again["links"]["outlinks"]] == [f"{KB}/leaf/3"]
    assert len(again["graph"]["nodes"]) == 2 and again["graph"]["truncated"] is False


async def test_list_newest_first(owner: Client, world: dict[str, str]) -> None:
    oldest = await ok(owner, "manage_document", action="list", source_id=world["A"])
    newest = await ok(owner, "manage_document", action="list", source_id=world["A"], order="newest")
    assert [d["title"] for d in oldest["documents"]] == ["One", "Two", "Three"]
    assert [d["title"] for d in newest["documents"]] == ["Three", "Two", "One"]
    same = await ok(owner, "manage_document", action="list", source_id=world["A"], order="oldest")
    assert same["documents"] == oldest["documents"]
    await err(owner, "manage_document", "INVALID_ARGUMENT", action="list", source_id=world["A"], order="sideways")
