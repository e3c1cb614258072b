"""Chaos scenarios that kill -9 the server in the middle of work, restart it and check what was stored:
a 300-file directory ingest, a large content update of many documents, and a crawl of a local site."""

from __future__ import annotations

import asyncio
import random
import re
import time
from pathlib import Path
from typing import Any

import asyncpg
from mcp import Client

from bench.chaos_lib import Server, base_env, integrity, row, tool
from tests.support.fixture_site import FixtureSite

WORDS = "otter river stone kelp harbour tide moss lantern copper meadow glacier quarry orchard".split()

# ------------------------------------------------------------------ server killed mid-ingest


async def kill_mid_ingest(work: Path, dsn: str, files: int) -> None:
    folder = work / "ingest"
    folder.mkdir()
    for i in range(files):
        (folder / f"note_{i:03d}.md").write_text(f"# Note {i}\n\n" + f"Paragraph {i} about topic {i % 17}. " * 40)
    env = base_env(work / "ingest-data", work, dsn, call_timeout_seconds="1200")  # one call ingests 300 files
    server = await Server(env).start()

    async def ingest() -> None:
        async with Client(f"{server.url}/mcp") as client:
            await tool(client, "manage_document", 1200, action="create", title="Bulk", file_path=str(folder))

    task = asyncio.create_task(ingest())
    deadline = time.monotonic() + 120
    while (await integrity(dsn))[0] < files // 10 and time.monotonic() < deadline:  # well under way
        await asyncio.sleep(0.1)
    server.kill()
    await asyncio.gather(task, return_exceptions=True)
    docs, empty, wrong = await integrity(dsn)
    row("server kill -9 mid 300-file ingest", f"{docs}/{files} stored; {empty} without chunks; "
        f"{wrong} wrong chunk_count", empty == 0 and wrong == 0)  # fmt: skip
    server = await Server(env).start()
    try:
        async with Client(f"{server.url}/mcp") as client:
            reply, _ = await tool(client, "manage_document", 1200, action="create", title="Bulk", file_path=str(folder))
        docs, empty, wrong = await integrity(dsn)
        row("restart + same ingest again", f"{reply['success']}; {docs}/{files} stored; {empty} empty; "
            f"{wrong} wrong chunk_count", reply["success"] and docs == files and empty == 0 and wrong == 0)  # fmt: skip
    finally:
        server.stop()


# ------------------------------------------------------------------ server killed mid content update


def version_text(version: str, doc: int, paragraphs: int) -> str:
    rng = random.Random(f"{version}-{doc}")
    return "\n\n".join(
        f"{version.capitalize()} version, document {doc}, paragraph {p}: " + " ".join(rng.choices(WORDS, k=45)) + "."
        for p in range(paragraphs)
    )


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


async def versions_in_db(dsn: str, ids: list[str], old: dict[str, str], new: dict[str, str]) -> dict[str, int]:
    """Per document: is its content old or new, and do all its chunks come from that same version?"""
    counts = {"old": 0, "new": 0, "mixed": 0, "empty": 0, "wrong_count": 0}
    conn = await asyncpg.connect(dsn)
    try:
        for did in ids:
            doc = await conn.fetchrow("SELECT content, chunk_count FROM documents WHERE id = $1::uuid", did)
            texts = [r["text"] for r in await conn.fetch("SELECT text FROM chunks WHERE document_id = $1::uuid", did)]
            if doc is None or not texts:
                counts["empty"] += 1
                continue
            counts["wrong_count"] += doc["chunk_count"] != len(texts)
            content = "old" if doc["content"] == old[did] else "new" if doc["content"] == new[did] else "?"
            kinds = set()
            for text in texts:
                piece = squash(text)
                kinds.add("old" if piece in squash(old[did]) else "new" if piece in squash(new[did]) else "?")
            counts[content if kinds == {content} and content != "?" else "mixed"] += 1
    finally:
        await conn.close()
    return counts


async def kill_mid_update(work: Path, dsn: str, documents: int) -> None:
    env = base_env(work / "update-data", work, dsn)
    server = await Server(env).start()
    old: dict[str, str] = {}
    new: dict[str, str] = {}
    async with Client(f"{server.url}/mcp") as client:
        for i in range(documents):
            text = version_text("old", i, 16)  # ~12 KB: ~14 chunks
            reply, _ = await tool(client, "manage_document", 300, action="create", title=f"Update {i}", content=text)
            did = reply["document"]["id"]
            old[did], new[did] = text, version_text("new", i, 32)  # ~24 KB: ~28 chunks
    ids = list(old)
    done: list[str] = []

    async def updater(mine: list[str], url: str) -> None:
        async with Client(f"{url}/mcp") as client:
            for did in mine:
                args = {"action": "update", "document_id": did, "content": new[did]}
                reply, _ = await tool(client, "manage_document", 300, **args)
                if reply["success"]:
                    done.append(did)

    tasks = [asyncio.create_task(updater(ids[k::4], server.url)) for k in range(4)]
    deadline = time.monotonic() + 60
    while len(done) < max(2, documents // 4) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    server.kill()
    await asyncio.gather(*tasks, return_exceptions=True)
    counts = await versions_in_db(dsn, ids, old, new)
    row(f"server kill -9 mid update of {documents} docs (12 KB -> 24 KB each)",
        f"{counts['new']} wholly new, {counts['old']} wholly old, {counts['mixed']} mixed, {counts['empty']} "
        f"without chunks, {counts['wrong_count']} wrong chunk_count ({len(done)} updates had answered)",
        counts["mixed"] == counts["empty"] == counts["wrong_count"] == 0 and counts["new"] >= len(done))  # fmt: skip
    server = await Server(env).start()
    try:
        await asyncio.gather(*(updater([d for d in ids[k::4] if d not in done], server.url) for k in range(4)))
        counts = await versions_in_db(dsn, ids, old, new)
        held = counts["new"] == documents and counts["wrong_count"] == 0
        row("restart + remaining updates", f"{counts['new']}/{documents} wholly new; {counts['mixed']} mixed; "
            f"{counts['wrong_count']} wrong chunk_count", held)  # fmt: skip
    finally:
        server.stop()


# ------------------------------------------------------------------ server killed mid crawl


async def crawl_state(dsn: str, job_id: str) -> dict[str, Any]:
    conn = await asyncpg.connect(dsn)
    try:
        source = await conn.fetchval("SELECT source_id FROM crawl_jobs WHERE id = $1::uuid", job_id)
        urls = [r["url"] for r in await conn.fetch("SELECT url FROM documents WHERE source_id = $1", source)]
        same_content = await conn.fetchval(
            "SELECT count(*) FROM (SELECT 1 FROM documents WHERE source_id = $1 GROUP BY content_hash "
            "HAVING count(*) > 1) d",
            source,
        )
        open_urls = await conn.fetchval(
            "SELECT count(*) FROM crawl_frontier WHERE job_id = $1::uuid AND state IN ('pending', 'fetching')", job_id
        )
        status = await conn.fetchval("SELECT status FROM crawl_jobs WHERE id = $1::uuid", job_id)
    finally:
        await conn.close()
    return {"urls": urls, "same_content": same_content, "open": open_urls, "status": status}


async def kill_mid_crawl(work: Path, dsn: str, pages: int) -> None:
    site = FixtureSite(with_defaults=False).start()
    try:
        expected = set(site.generate(pages - 1)) | {site.url_for("/gen/")}
        env = base_env(work / "crawl-data", work, dsn, crawl_allow_private="true", crawl_delay_seconds="0.05",
                       job_stale_seconds="5", job_heartbeat_seconds="1", job_poll_seconds="0.5")  # fmt: skip
        server = await Server(env, worker=True).start()
        async with Client(f"{server.url}/mcp") as client:
            reply, _ = await tool(client, "crawl_website", action="start", url=site.url_for("/gen/"), recursive=True,
                                  max_depth=5, max_pages=pages, title="Chaos crawl")  # fmt: skip
        job_id = reply["crawl_job"]["id"]
        deadline = time.monotonic() + 120
        while len((await crawl_state(dsn, job_id))["urls"]) < pages // 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        server.kill()
        at_kill = len((await crawl_state(dsn, job_id))["urls"])
        server = await Server(env, worker=True).start()
        started = time.monotonic()
        try:
            async with Client(f"{server.url}/mcp") as client:
                status = "running"
                while status in ("queued", "running") and time.monotonic() - started < 300:
                    reply, _ = await tool(client, "crawl_website", action="status", job_id=job_id, wait_seconds=10)
                    status = reply["crawl_job"]["status"] if reply["success"] else status
        finally:
            server.stop()
        state = await crawl_state(dsn, job_id)
        docs, empty, wrong = await integrity(dsn)
        urls = state["urls"]
        duplicates = len(urls) - len(set(urls)) + state["same_content"]
        missing = len(expected - set(urls))
        row(f"server kill -9 mid crawl of {pages} local pages, restart",
            f"{at_kill} pages stored at the kill; job {state['status']} {time.monotonic() - started:.0f} s after "
            f"restart; {len(set(urls))}/{pages} pages stored, {duplicates} duplicates, {missing} missing, "
            f"{state['open']} frontier URLs left open; {empty} without chunks, {wrong} wrong chunk_count",
            state["status"] == "completed" and duplicates == 0 and missing == 0 and state["open"] == 0
            and empty == 0 and wrong == 0)  # fmt: skip
    finally:
        site.stop()
