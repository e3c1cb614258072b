"""Chaos benchmark (issue 10): faults against a real `archivist serve --http`, printed as a table.

Scenarios: kill -9 of the embedded PostgreSQL and SIGSTOP/SIGCONT of it under several search clients
(every answer success or retryable UNAVAILABLE, recovery time); kill -9 of the server in the middle of a
directory ingest, of a large content update and of a crawl, then restart (bench/chaos_kills.py: no
document without chunks, chunk_count exact, every document wholly old or wholly new, each page stored
once); a full and a read-only data directory (bench/chaos_disk.py, needs root for its tmpfs); N
concurrent agents over HTTP (0 INTERNAL, 0 lost writes, 0 duplicates, p50/p95 per tool).

    nice -n 10 .venv/bin/python bench/chaos.py [--agents 50] [--seconds 60] [--files 300] [--only swarm]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
import psutil
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.chaos_disk import disk_faults  # noqa: E402
from bench.chaos_kills import kill_mid_crawl, kill_mid_ingest, kill_mid_update  # noqa: E402
from bench.chaos_lib import ROWS, Server, base_env, row, tool  # noqa: E402
from services.core.supervisor import read_pid  # noqa: E402

# ------------------------------------------------------------------ database faults


async def search_loop(url: str, stop: asyncio.Event, log: list[tuple[float, str, float]]) -> None:
    async with Client(f"{url}/mcp") as client:
        while not stop.is_set():
            try:
                reply, took = await tool(client, "search_knowledge_base", query="otters sleeping")
                code = "ok" if reply["success"] else reply["error_code"] + ("" if reply["retryable"] else "!")
            except TimeoutError:
                code, took = "HANG", 30.0
            log.append((time.monotonic(), code, took))
            await asyncio.sleep(0.05)


async def database_faults(work: Path, clients: int) -> None:
    data = work / "embedded"
    server = await Server(base_env(data, work)).start()
    try:
        async with Client(f"{server.url}/mcp") as client:
            await tool(client, "manage_document", action="create", title="Chaos", content="Otters sleep holding hands.")
        pgdata = data / "pgdata"
        for fault in ("kill -9", "SIGSTOP 3 s"):
            stop, log = asyncio.Event(), []
            loops = [asyncio.create_task(search_loop(server.url, stop, log)) for _ in range(clients)]
            await asyncio.sleep(2)
            pid = read_pid(pgdata)
            assert pid is not None
            if fault == "kill -9":
                os.kill(pid, signal.SIGKILL)
                back_at = time.monotonic()  # the supervisor brings it back: recovery counts from the fault
            else:
                frozen = [pid, *(p.pid for p in psutil.Process(pid).children())]  # postmaster + backends
                for each in frozen:
                    os.kill(each, signal.SIGSTOP)
                await asyncio.sleep(3)
                for each in frozen:
                    os.kill(each, signal.SIGCONT)
                back_at = time.monotonic()
            healed = None
            while time.monotonic() - back_at < 30:
                await asyncio.sleep(0.2)
                if read_pid(pgdata) and [c for t, c, _ in log if t > back_at + 0.1 and c == "ok"]:
                    healed = min(t for t, c, _ in log if t > back_at + 0.1 and c == "ok") - back_at
                    break
            await asyncio.sleep(1)
            stop.set()
            await asyncio.gather(*loops, return_exceptions=True)
            codes = [c for _, c, _ in log]
            bad = [c for c in codes if c not in ("ok", "UNAVAILABLE")]
            counts = {c: codes.count(c) for c in sorted(set(codes))}
            worst = max(took for _, _, took in log)
            row(
                f"PostgreSQL {fault}, {clients} search clients",
                f"{len(codes)} answers {counts}; healed in {healed if healed is None else round(healed, 1)} s; "
                f"slowest {worst:.1f} s",
                not bad and healed is not None and healed <= 10,
            )
    finally:
        server.stop()


# ------------------------------------------------------------------ agent swarm


async def agent(url: str, n: int, until: float, stats: dict[str, Any]) -> None:
    """create, get, update, search, list sources, list crawl jobs; every third document is deleted again."""
    async with Client(f"{url}/mcp") as client:
        i = 0
        while time.monotonic() < until:
            i += 1
            title = f"Swarm {n % 5}"  # agents share five titles: find-or-create races
            reply = await call(client, stats, "create", "manage_document", action="create", title=title,
                               content=f"Agent {n} note {i} on otters.")  # fmt: skip
            if reply["success"]:
                did = reply["document"]["id"]
                stats["created"].append(did)
                await call(client, stats, "get", "manage_document", action="get", document_id=did)
                updated = f"Agent {n} note {i} on otters, revised: they sleep holding hands."
                reply = await call(client, stats, "update", "manage_document", action="update", document_id=did,
                                   content=updated)  # fmt: skip
                if reply["success"]:
                    stats["updated"][did] = updated
            await call(client, stats, "search", "search_knowledge_base", query=f"agent {n} otters", match_count=5)
            await call(client, stats, "list", "manage_source", action="list", per_page=5)
            await call(client, stats, "crawl status", "crawl_website", action="list", per_page=5)
            if reply["success"] and i % 3 == 0:
                gone = await call(client, stats, "delete", "manage_document", action="delete", document_id=did)
                if gone["success"]:
                    stats["deleted"].add(did)


async def call(client: Client, stats: dict[str, Any], name: str, tool_name: str, **args: Any) -> dict[str, Any]:
    reply, took = await tool(client, tool_name, **args)
    stats["times"].setdefault(name, []).append(took)
    if not reply["success"]:
        stats["errors"].append(reply["error_code"])
    return reply


async def swarm_checks(dsn: str, stats: dict[str, Any]) -> dict[str, int]:
    """Lost creates and updates, resurrected deletes, duplicate sources and documents, straight in PostgreSQL."""
    kept = [d for d in stats["created"] if d not in stats["deleted"]]
    conn = await asyncpg.connect(dsn)
    try:
        present = await conn.fetchval("SELECT count(*) FROM documents WHERE id = ANY($1::uuid[])", kept)
        back = await conn.fetchval("SELECT count(*) FROM documents WHERE id = ANY($1::uuid[])", list(stats["deleted"]))
        contents = await conn.fetch(
            "SELECT id::text, content FROM documents WHERE id = ANY($1::uuid[])", list(stats["updated"])
        )
        dupe_sources = await conn.fetchval(
            "SELECT count(*) FROM (SELECT lower(title) FROM sources GROUP BY lower(title), "
            "coalesce(url, ''), coalesce(version, '') HAVING count(*) > 1) d"
        )
        dupe_docs = await conn.fetchval(
            "SELECT count(*) FROM (SELECT 1 FROM documents GROUP BY source_id, content_hash HAVING count(*) > 1) d"
        )
    finally:
        await conn.close()
    lost_updates = sum(r["content"] != stats["updated"][r["id"]] for r in contents)
    return {"kept": len(kept), "lost": len(kept) - present, "resurrected": back, "lost_updates": lost_updates,
            "dupe_sources": dupe_sources, "dupe_docs": dupe_docs}  # fmt: skip


async def swarm(work: Path, dsn: str, agents: int, seconds: float, **settings: str) -> None:
    # 50 agents share the loopback caller's one rate bucket: lift it, the swarm measures the service itself
    env = base_env(work / "swarm-data", work, dsn, rate_per_minute="1000000", **settings)
    server = await Server(env).start()
    stats: dict[str, Any] = {"times": {}, "errors": [], "created": [], "updated": {}, "deleted": set()}
    try:
        until = time.monotonic() + seconds
        results = await asyncio.gather(
            *(agent(server.url, n, until, stats) for n in range(agents)), return_exceptions=True
        )
        crashed = [r for r in results if isinstance(r, BaseException)]
        checks = await swarm_checks(dsn, stats)
    finally:
        server.stop()
    internal = stats["errors"].count("INTERNAL")
    calls = sum(len(v) for v in stats["times"].values())
    row(f"{agents} agents x {seconds:.0f} s over HTTP", f"{calls} calls, errors {sorted(set(stats['errors']))}, "
        f"{internal} INTERNAL, {len(crashed)} agents crashed", internal == 0 and not crashed)  # fmt: skip
    row("lost writes / duplicates",
        f"{checks['lost']} of {checks['kept']} kept creates lost, {checks['lost_updates']} of "
        f"{len(stats['updated'])} updates lost, {checks['resurrected']} of {len(stats['deleted'])} deletes undone; "
        f"{checks['dupe_sources']} duplicate sources, {checks['dupe_docs']} duplicate documents",
        not any(checks[k] for k in ("lost", "lost_updates", "resurrected", "dupe_sources", "dupe_docs")))  # fmt: skip
    for name, times in sorted(stats["times"].items()):
        ms = sorted(t * 1000 for t in times)
        p95 = ms[int(0.95 * (len(ms) - 1))]
        held = name != "search" or p95 <= 300
        row(f"  {name} latency", f"p50 {statistics.median(ms):.0f} ms, p95 {p95:.0f} ms (n={len(ms)})", held)


async def survive(name: str, scenario: Any) -> None:
    """Run one scenario; if the harness itself fails, the table gets a row saying so and the rest still run."""
    try:
        await scenario
    except Exception as exc:  # noqa: BLE001 - reported as a failed row
        row(f"{name}: scenario did not complete", f"{type(exc).__name__}: {str(exc)[:200]}", False)


SCENARIOS = ("db", "ingest", "update", "crawl", "disk", "swarm")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--documents", type=int, default=20, help="documents in the large content update")
    parser.add_argument("--pages", type=int, default=100, help="pages of the crawled local site (max 100)")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--set", action="append", default=[], help="server setting for the swarm, e.g. db_pool_max=20")
    parser.add_argument("--only", help=f"comma-separated subset of {','.join(SCENARIOS)}")
    args = parser.parse_args()
    chosen = set(args.only.split(",")) if args.only else set(SCENARIOS)
    import pgserver

    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        work = Path(tmp)
        if "db" in chosen:
            await survive("database faults", database_faults(work, args.clients))
        if "disk" in chosen:
            await survive("disk faults", disk_faults(work))
        shared = [name for name in ("ingest", "update", "crawl", "swarm") if name in chosen]
        if shared:
            pg = pgserver.get_server(work / "pg", cleanup_mode="stop")
            try:
                for name in shared:
                    pg.psql(f"CREATE DATABASE {name};")
                    dsn = pg.get_uri(database=name)
                    if name == "ingest":
                        await survive(name, kill_mid_ingest(work, dsn, args.files))
                    elif name == "update":
                        await survive(name, kill_mid_update(work, dsn, args.documents))
                    elif name == "crawl":
                        await survive(name, kill_mid_crawl(work, dsn, args.pages))
                    else:
                        settings = dict(kv.split("=", 1) for kv in args.set)
                        await survive(name, swarm(work, dsn, args.agents, args.seconds, **settings))
            finally:
                pg.cleanup()
    print("| scenario | measured | held |\n|---|---|---|")
    for name, measured, held in ROWS:
        print(f"| {name} | {measured} | {held} |")


if __name__ == "__main__":
    asyncio.run(main())
