"""Profiles through the real MCP tools: searching as a profile, jobs confined to the scope, and sources
created while profiles are selected joining the first one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
import pytest_asyncio

from models.jobs import CrawlRequest
from server import build_server
from services.access.scope import Scope, use_scope
from services.app import Runtime
from services.search import SEARCH_TYPES
from tests.support.mcp_helpers import client_in_own_task, err, ok

ALPHA = "Alpha tide tables: the spring tide at Northport peaks at 6.1 metres in March."
BETA = "Beta orchard notes: pruning apple trees in late winter improves the harvest."
GAMMA = "Gamma tide gauge manual: calibrate the float gauge before the spring tide."


@pytest_asyncio.fixture(scope="module")
async def world(app) -> dict[str, Any]:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        ids = {}
        for key, text in (("a", ALPHA), ("b", BETA), ("c", GAMMA)):
            src = await app.sources.create(title=f"Profile src {key}", source_type="api")
            await app.documents.create_from_text(src.id, text, title=f"doc {key}")
            ids[key] = src.id
        await app.profiles.create(
            "pa", "Alpha tides for the harbour team", [ids["a"]], search_type="vector", match_count=1
        )
        await app.profiles.create("pb", "Beta and gamma", [ids["b"], ids["c"]], similarity_threshold=0.99)
        await app.profiles.create("pk0", "", [ids["a"], ids["c"]], search_type="hybrid", keyword_weight=0.0)
        await app.profiles.create("pk1", "", [ids["a"], ids["c"]], search_type="hybrid", keyword_weight=1.0)
        await app.profiles.create("poff", "disabled one", [ids["a"]], enabled=False)
        return ids


def server_for(settings: Any, embedder: Any, profiles: list[str] | None = None) -> Any:
    return build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False, profiles=profiles)


async def test_search_as_a_profile(world, settings, embedder) -> None:
    async with client_in_own_task(server_for(settings, embedder)) as c:
        r = await ok(c, "search_knowledge_base", query="spring tide", profile="pa")
        assert r["profile"] == "pa" and r["search_type"] == "vector" and r["count"] == 1
        assert {h["metadata"]["source_id"] for h in r["results"]} == {str(world["a"])}
        r = await ok(c, "search_knowledge_base", query="spring tide", profile="pa", match_count=5, search_type="hybrid")
        assert r["search_type"] == "hybrid" and {h["metadata"]["source_id"] for h in r["results"]} == {str(world["a"])}
        # pb's similarity floor 0.99 applies when the caller gives none, not when it gives one
        assert (await ok(c, "search_knowledge_base", query="apple trees", profile="pb"))["count"] == 0
        r = await ok(c, "search_knowledge_base", query="apple trees", profile="pb", similarity_threshold=0.0)
        found = {h["metadata"]["source_id"] for h in r["results"]}
        assert r["count"] >= 1 and found <= {str(world["b"]), str(world["c"])}
        # the keyword weight is the profile's: all-keyword and all-vector fusions score differently
        k0 = await ok(c, "search_knowledge_base", query="spring tide gauge", profile="pk0")
        k1 = await ok(c, "search_knowledge_base", query="spring tide gauge", profile="pk1")
        assert [h["score"] for h in k0["results"]] != [h["score"] for h in k1["results"]]
        for bad in ("poff", "nope"):
            e = await err(c, "search_knowledge_base", "INVALID_ARGUMENT", query="tide", profile=bad)
            assert "pa" in e["suggestion"] and "pb" in e["suggestion"] and "poff" not in e["suggestion"]
        # a source outside the chosen profile reads as missing
        await err(c, "search_knowledge_base", "NOT_FOUND", query="x", profile="pa", source_id=str(world["b"]))


async def test_selected_profiles_limit_the_choice_and_name_themselves(world, settings, embedder) -> None:
    async with client_in_own_task(server_for(settings, embedder, ["pa", "pb"])) as c:
        listed = await c.list_tools()
        search = next(t for t in listed.tools if t.name == "search_knowledge_base")
        described = search.description or ""
        assert "pa (Alpha tides for the harbour team)" in described and "pb (Beta and gamma)" in described
        assert "pk0" not in described
        assert len(json.dumps([t.model_dump(mode="json", exclude_none=True) for t in listed.tools])) < 10_000
        r = await ok(c, "search_knowledge_base", query="tide")  # two profiles: no defaults, both scopes
        found = {h["metadata"]["source_id"] for h in r["results"]}
        assert "profile" not in r and found <= {str(world[k]) for k in "abc"}
        e = await err(c, "search_knowledge_base", "INVALID_ARGUMENT", query="tide", profile="pk1")
        assert "pa, pb" in e["suggestion"] and "pk1" not in e["suggestion"]
        r = await ok(c, "search_knowledge_base", query="spring tide", profile="pb", similarity_threshold=0.0)
        assert {h["metadata"]["source_id"] for h in r["results"]} <= {str(world["b"]), str(world["c"])}
    async with client_in_own_task(server_for(settings, embedder, ["pa"])) as c:
        r = await ok(c, "search_knowledge_base", query="spring tide")  # one profile: its defaults apply
        assert r["profile"] == "pa" and r["search_type"] == "vector" and r["count"] == 1


@pytest.mark.usefixtures("owner")
async def test_jobs_are_scoped(world, app, settings, embedder) -> None:
    job_a = (await app.crawl.start(CrawlRequest(url="http://127.0.0.1:9/a/", source_id=world["a"]))).job
    job_b = (await app.crawl.start(CrawlRequest(url="http://127.0.0.1:9/b/", source_id=world["b"]))).job
    async with client_in_own_task(server_for(settings, embedder, ["pa"])) as c:
        listed = await ok(c, "crawl_website", action="list", per_page=20)
        assert {j["source_id"] for j in listed["jobs"]} == {str(world["a"])} and listed["total_count"] == 1
        assert (await ok(c, "crawl_website", action="status", job_id=str(job_a.id)))["crawl_job"]["id"] == str(job_a.id)
        for action in ("status", "cancel", "recrawl"):
            hidden = await err(c, "crawl_website", "NOT_FOUND", action=action, job_id=str(job_b.id))
            random_id = str(uuid4())
            missing = await err(c, "crawl_website", "NOT_FOUND", action=action, job_id=random_id)
            assert hidden["error"].replace(str(job_b.id), "ID") == missing["error"].replace(random_id, "ID")
            assert hidden["suggestion"] == missing["suggestion"]
        await err(c, "crawl_website", "NOT_FOUND", action="list", source_id=str(world["b"]))
        await err(c, "crawl_website", "NOT_FOUND", action="sync", source_id=str(world["b"]))
        # recrawl by URL finds only in-scope crawls: B's URL answers as a URL never crawled
        e = await err(c, "crawl_website", "INVALID_ARGUMENT", action="recrawl", url="http://127.0.0.1:9/b/")
        assert "never been crawled" in e["error"]
        await ok(c, "crawl_website", action="cancel", job_id=str(job_a.id))
    assert (await app.jobs.get(job_b.id)).status == "queued" and not (await app.jobs.get(job_b.id)).cancel_requested
    await app.jobs.cancel(job_b.id, wait_seconds=0)


@pytest.mark.usefixtures("owner")
async def test_sources_created_in_scope_join_the_first_profile(world, app, settings, embedder, files_dir: Path) -> None:
    folder = files_dir / "joined-notes"
    folder.mkdir()
    (folder / "n.md").write_text("# Notes\n\nKelp forests grow fast.")
    before_b = (await app.sources.stats(world["b"])).documents_count
    await app.profiles.update("pb", allowed_paths=[str(folder)])  # a confined caller reads only its profiles' paths
    async with client_in_own_task(server_for(settings, embedder, ["pa", "pb"])) as c:
        made = (await ok(c, "manage_source", action="create", title="Joined by create"))["source"]["id"]
        doc = await ok(c, "manage_document", action="create", title="Joined by title", content="Fresh text on kelp.")
        by_title = doc["document"]["source_id"]
        crawl = await ok(c, "crawl_website", action="start", url="http://127.0.0.1:9/joined/")
        by_crawl = crawl["source_id"]
        assert crawl["source_created"] is True
        synced = await ok(c, "crawl_website", action="sync", folder_path=str(folder))
        by_sync = synced["source_id"]
        new = [made, by_title, by_crawl, by_sync]
        for sid in new:  # the caller sees what it made, in later calls too
            await ok(c, "manage_source", action="get", source_id=sid)
        assert crawl["crawl_job"]["id"] in {j["id"] for j in (await ok(c, "crawl_website", action="list"))["jobs"]}
        # a title that exists only outside the scope is not found, nor written into, nor a conflict: the
        # caller gets a source of its own under that title (in its first profile's namespace)
        outside = await app.sources.create(title="Outside title", source_type="api")
        own = await ok(c, "manage_document", action="create", title="Outside title", content="x")
        assert own["source_created"] is True and own["source_id"] != str(outside.id), own
        assert (await app.sources.stats(outside.id)).documents_count == 0
        new.append(own["source_id"])
    pa = await app.profiles.get("pa")
    assert [str(s) for s in pa.source_ids] == [str(world["a"]), *new]
    assert all(str(s) not in new for s in (await app.profiles.get("pb")).source_ids)
    assert (await app.sources.stats(world["b"])).documents_count == before_b
    for sid in new[2:]:
        for job in (await app.jobs.list(None, sid, 1, 20)).items:
            await app.jobs.cancel(job.id, wait_seconds=0)


async def test_a_profile_stores_every_search_type(app) -> None:
    """Every search type the search service accepts is a valid profile default (model, check, SQL)."""
    for kind in SEARCH_TYPES:
        made = await app.profiles.create(f"every-{kind}", search_type=kind)
        assert made.search_type == kind and (await app.profiles.get(f"every-{kind}")).search_type == kind
        await app.profiles.delete(f"every-{kind}")
    await app.profiles.create("every-update")
    assert (await app.profiles.update("every-update", search_type="keyword")).search_type == "keyword"
    await app.profiles.delete("every-update")
