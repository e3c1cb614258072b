"""Chaos benchmark (issue 10): faults against a real `archivist serve --http`, printed as a table.

Scenarios: kill -9 of the embedded PostgreSQL and SIGSTOP/SIGCONT of it under several search clients
(every answer success or retryable UNAVAILABLE, recovery time); kill -9 of the server in the middle of a
directory ingest, then restart (no document without chunks, chunk_count exact); N concurrent agents
over HTTP (0 INTERNAL, 0 lost writes, 0 duplicate sources, p50/p95 per tool).

    nice -n 10 .venv/bin/python bench/chaos.py [--agents 50] [--seconds 60] [--files 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import psutil
from mcp import Client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from services.supervisor import read_pid  # noqa: E402

ARCHIVIST = shutil.which("archivist", path=str(Path(sys.executable).parent)) or "archivist"
ROWS: list[tuple[str, str, str]] = []


def row(name: str, measured: str, held: bool) -> None:
    ROWS.append((name, measured, "yes" if held else "NO"))
    print(f"  {name}: {measured} -> {'held' if held else 'NOT HELD'}", file=sys.stderr)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One `archivist serve --http` subprocess."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env, self.port, self.proc = env, free_port(), None

    async def start(self) -> Server:
        cmd = [ARCHIVIST, "serve", "--http", "--port", str(self.port), "--no-worker"]
        log = open(os.environ.get("CHAOS_SERVER_LOG", os.devnull), "a")  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, env=self.env, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 120
        async with httpx.AsyncClient() as http:
            while time.monotonic() < deadline:
                try:
                    if (await http.get(f"{self.url}/healthz", timeout=2)).status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.3)
        raise RuntimeError("server did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


def base_env(data_dir: Path, allowed: Path, database_url: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHIVIST_") and k != "DATABASE_URL"}
    env.update(ARCHIVIST_DATA_DIR=str(data_dir), ARCHIVIST_ALLOWED_PATHS=str(allowed), ARCHIVIST_LOG_LEVEL="WARNING")
    env["HF_HUB_OFFLINE"] = "1"
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


async def tool(client: Client, name: str, **args: Any) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    result = await asyncio.wait_for(client.call_tool(name, args), 30)
    return json.loads(result.content[0].text), time.monotonic() - started


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


# ------------------------------------------------------------------ server killed mid-ingest


async def integrity(dsn: str) -> tuple[int, int, int]:
    conn = await asyncpg.connect(dsn)
    try:
        docs = await conn.fetchval("SELECT count(*) FROM documents")
        empty = await conn.fetchval(
            "SELECT count(*) FROM documents d WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.document_id = d.id)"
        )
        wrong = await conn.fetchval(
            "SELECT count(*) FROM documents d WHERE chunk_count <> "
            "(SELECT count(*) FROM chunks c WHERE c.document_id = d.id)"
        )
    finally:
        await conn.close()
    return docs, empty, wrong


async def kill_mid_ingest(work: Path, dsn: str, files: int) -> None:
    folder = work / "ingest"
    folder.mkdir()
    for i in range(files):
        (folder / f"note_{i:03d}.md").write_text(f"# Note {i}\n\n" + f"Paragraph {i} about topic {i % 17}. " * 40)
    env = base_env(work / "ingest-data", work, dsn)
    server = await Server(env).start()

    async def ingest() -> None:
        async with Client(f"{server.url}/mcp") as client:
            await tool(client, "manage_document", action="create", title="Bulk", file_path=str(folder))

    task = asyncio.create_task(ingest())
    await asyncio.sleep(4)
    server.kill()
    await asyncio.gather(task, return_exceptions=True)
    docs, empty, wrong = await integrity(dsn)
    row("server kill -9 mid ingest", f"{docs}/{files} stored; {empty} without chunks; {wrong} wrong chunk_count",
        empty == 0 and wrong == 0)  # fmt: skip
    server = await Server(env).start()
    try:
        async with Client(f"{server.url}/mcp") as client:
            reply, _ = await tool(client, "manage_document", action="create", title="Bulk", file_path=str(folder))
        docs, empty, wrong = await integrity(dsn)
        row("restart + same ingest again", f"{reply['success']}; {docs}/{files} stored; {empty} empty; "
            f"{wrong} wrong chunk_count", reply["success"] and docs == files and empty == 0 and wrong == 0)  # fmt: skip
    finally:
        server.stop()


# ------------------------------------------------------------------ agent swarm


async def agent(url: str, n: int, until: float, stats: dict[str, Any]) -> None:
    async with Client(f"{url}/mcp") as client:
        i = 0
        while time.monotonic() < until:
            i += 1
            title = f"Swarm {n % 5}"  # agents share five titles: find-or-create races
            reply, took = await tool(
                client, "manage_document", action="create", title=title, content=f"Agent {n} note {i} on otters."
            )
            record(stats, "create", reply, took)
            if reply["success"]:
                stats["created"].append(reply["document"]["id"])
                reply, took = await tool(client, "manage_document", action="get", document_id=reply["document"]["id"])
                record(stats, "get", reply, took)
            reply, took = await tool(client, "search_knowledge_base", query=f"agent {n} otters", match_count=5)
            record(stats, "search", reply, took)
            reply, took = await tool(client, "manage_source", action="list", per_page=5)
            record(stats, "list", reply, took)
            reply, took = await tool(client, "crawl_website", action="list", per_page=5)
            record(stats, "crawl list", reply, took)


def record(stats: dict[str, Any], name: str, reply: dict[str, Any], took: float) -> None:
    stats["times"].setdefault(name, []).append(took)
    if not reply["success"]:
        stats["errors"].append(reply["error_code"])


async def swarm(work: Path, dsn: str, agents: int, seconds: float) -> None:
    server = await Server(base_env(work / "swarm-data", work, dsn)).start()
    stats: dict[str, Any] = {"times": {}, "errors": [], "created": []}
    try:
        until = time.monotonic() + seconds
        results = await asyncio.gather(
            *(agent(server.url, n, until, stats) for n in range(agents)), return_exceptions=True
        )
        crashed = [r for r in results if isinstance(r, BaseException)]
        conn = await asyncpg.connect(dsn)
        try:
            present = await conn.fetchval("SELECT count(*) FROM documents WHERE id = ANY($1::uuid[])", stats["created"])
            dupes = await conn.fetchval(
                "SELECT count(*) FROM (SELECT lower(title) FROM sources GROUP BY lower(title), "
                "coalesce(url, ''), coalesce(version, '') HAVING count(*) > 1) d"
            )
        finally:
            await conn.close()
    finally:
        server.stop()
    internal = stats["errors"].count("INTERNAL")
    calls = sum(len(v) for v in stats["times"].values())
    row(f"{agents} agents x {seconds:.0f} s over HTTP", f"{calls} calls, errors {sorted(set(stats['errors']))}, "
        f"{internal} INTERNAL, {len(crashed)} agents crashed", internal == 0 and not crashed)  # fmt: skip
    lost = len(stats["created"]) - present
    row("lost writes / duplicate sources", f"{lost} of {len(stats['created'])} creates lost; {dupes} duplicate",
        lost == 0 and dupes == 0)  # fmt: skip
    for name, times in sorted(stats["times"].items()):
        ms = sorted(t * 1000 for t in times)
        p95 = ms[int(0.95 * (len(ms) - 1))]
        held = name != "search" or p95 <= 300
        row(f"  {name} latency", f"p50 {statistics.median(ms):.0f} ms, p95 {p95:.0f} ms (n={len(ms)})", held)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--only", choices=["db", "ingest", "swarm"], default=None)
    args = parser.parse_args()
    import pgserver

    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        work = Path(tmp)
        if args.only in (None, "db"):
            await database_faults(work, args.clients)
        if args.only in (None, "ingest", "swarm"):
            pg = pgserver.get_server(work / "pg", cleanup_mode="stop")
            try:
                if args.only in (None, "ingest"):
                    pg.psql("CREATE DATABASE ingest;")
                    await kill_mid_ingest(work, pg.get_uri(database="ingest"), args.files)
                if args.only in (None, "swarm"):
                    pg.psql("CREATE DATABASE swarm;")
                    await swarm(work, pg.get_uri(database="swarm"), args.agents, args.seconds)
            finally:
                pg.cleanup()
    print("| scenario | measured | held |\n|---|---|---|")
    for name, measured, held in ROWS:
        print(f"| {name} | {measured} | {held} |")


if __name__ == "__main__":
    asyncio.run(main())
