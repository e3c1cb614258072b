"""Many servers and workers on one PostgreSQL, shown on one machine (`make bench-cluster`).

    .venv/bin/python bench/cluster.py [--pages 300] [--clients 20] [--duration 60] [--no-kill]

One embedded PostgreSQL (started once, shared through its DATABASE_URL); two `archivist serve --http
--no-worker` processes on their own ports; three `archivist worker` processes. A generated 300-page
site (three sections of 100 pages, one crawl job each) is served on 127.0.0.1 and crawled while 20 MCP
clients (streamable HTTP, official SDK client), spread over both servers, make mixed tool calls.
Part-way through, one server and the worker holding a job are SIGKILLed: the clients of the dead
server retry on the other one, and the dead worker's job is taken over once its heartbeat goes stale.

Printed: URLs fetched more than once (from the fixture server's own log), documents per URL, client
errors, lost writes (every created document read back at the end), p50/p95 per tool, crawl time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import asyncpg  # noqa: E402
from mcp import Client  # noqa: E402

from bench.common import CACHE_DIR, free_port, machine_info  # noqa: E402
from bench.metrics import percentile  # noqa: E402
from tests.support.fixture_site import FixtureSite  # noqa: E402

logger = logging.getLogger("bench.cluster")

SECTIONS = ("/s0/", "/s1/", "/s2/")
CALL_TIMEOUT = 20.0
MIX = [("search", 40), ("create", 15), ("get", 15), ("list_documents", 10), ("list_sources", 10), ("status", 10)]


@dataclass
class Cluster:
    database_url: str
    env: dict[str, str]
    logs: Path
    servers: dict[int, subprocess.Popen] = field(default_factory=dict)
    workers: dict[str, subprocess.Popen] = field(default_factory=dict)

    def spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = (self.logs / f"{name}.log").open("wb")
        return subprocess.Popen([sys.executable, str(ROOT / "cli.py"), *args], env=self.env, stdout=log, stderr=log)

    def start_server(self) -> int:
        port = free_port()
        self.servers[port] = self.spawn(f"server-{port}", ["serve", "--http", "--no-worker", "--port", str(port)])
        return port

    def start_worker(self, worker_id: str) -> None:
        self.workers[worker_id] = self.spawn(f"worker-{worker_id}", ["worker", "--id", worker_id, "--jobs", "1"])

    def stop(self) -> None:
        for proc in [*self.servers.values(), *self.workers.values()]:
            if proc.poll() is None:
                proc.terminate()
        for proc in [*self.servers.values(), *self.workers.values()]:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


async def wait_ready(port: int, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    """Until the server answers a tool call (models loaded, database migrated)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server on port {port} exited with {proc.returncode}")
        try:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                result = await client.call_tool("manage_source", {"action": "list"})
                if json.loads(result.content[0].text).get("success"):
                    return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        await asyncio.sleep(0.5)
    raise RuntimeError(f"server on port {port} did not become ready")


@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)
    failovers: int = 0
    created: list[tuple[str, str]] = field(default_factory=list)  # (document id, unique marker)


class Agent:
    """One MCP client: prefers one server, moves to the other when its server stops answering."""

    def __init__(self, n: int, ports: list[int], stats: Stats, state: dict[str, Any]) -> None:
        self.n = n
        self.ports = ports[n % len(ports) :] + ports[: n % len(ports)]
        self.stats = stats
        self.state = state
        self.rng = random.Random(n)
        self.source_id: str | None = None
        self.doc_ids: list[str] = []

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set() and self.ports:
            port = self.ports[0]
            try:
                async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                    while not stop.is_set():
                        await self.one_call(client)
            except Exception as exc:  # noqa: BLE001 - a dead server: fail over and retry there
                if stop.is_set():
                    return
                logger.info("client %d lost server %d (%s); failing over", self.n, port, type(exc).__name__)
                self.stats.failovers += 1
                self.ports = self.ports[1:] + self.ports[:1]
                await asyncio.sleep(0.2)

    async def one_call(self, client: Client) -> None:
        op = self.rng.choices([m[0] for m in MIX], weights=[m[1] for m in MIX])[0]
        tool, args = self.arguments(op)
        started = time.perf_counter()
        result = await asyncio.wait_for(client.call_tool(tool, args), CALL_TIMEOUT)
        elapsed = (time.perf_counter() - started) * 1000
        payload = json.loads(result.content[0].text)
        if not payload["success"]:
            self.stats.errors[f"{op}:{payload['error_code']}"] += 1
            if len(self.stats.error_samples) < 5:
                self.stats.error_samples.append(f"{op}: {payload['error'][:160]}")
            if payload.get("retryable"):
                await asyncio.sleep(0.5)
            return
        self.stats.latencies[op].append(elapsed)
        self.remember(op, args, payload)

    def arguments(self, op: str) -> tuple[str, dict[str, Any]]:
        words = ["generated", "page", "token", "river", "garden", "pattern", "signal", "harbor", "lantern"]
        if op == "search":
            return "search_knowledge_base", {"query": " ".join(self.rng.sample(words, 3)), "match_count": 5}
        if op == "create" or not self.doc_ids:
            marker = f"agent{self.n}-note{len(self.doc_ids)}-{self.rng.getrandbits(32):08x}"
            content = f"# Note {marker}\n\nAgent {self.n} wrote this note with the marker {marker}."
            return "manage_document", {"action": "create", "title": f"Agent {self.n} notes", "content": content}
        if op == "get":
            return "manage_document", {"action": "get", "document_id": self.rng.choice(self.doc_ids)}
        if op == "list_documents":
            return "manage_document", {"action": "list", "source_id": self.source_id, "per_page": 20}
        if op == "list_sources":
            return "manage_source", {"action": "list", "per_page": 20}
        return "crawl_website", {"action": "status", "job_id": self.rng.choice(self.state["job_ids"])}

    def remember(self, op: str, args: dict[str, Any], payload: dict[str, Any]) -> None:
        if args.get("action") == "create" and "document" in payload:
            doc_id = payload["document"]["id"]
            self.source_id = payload["source_id"]
            if doc_id not in self.doc_ids:
                self.doc_ids.append(doc_id)
                marker = args["content"].split("marker ", 1)[1].rstrip(".")
                self.stats.created.append((doc_id, marker))


async def start_crawls(port: int, site: FixtureSite, pages_per_section: int) -> list[str]:
    job_ids = []
    async with Client(f"http://127.0.0.1:{port}/mcp") as client:
        for section in SECTIONS:
            result = await client.call_tool(
                "crawl_website",
                {
                    "action": "start",
                    "url": site.url_for(section),
                    "title": f"Cluster site {section}",
                    "recursive": True,
                    "max_depth": 6,
                    "max_pages": pages_per_section + 10,
                    "scope": "under-path",
                },
            )
            payload = json.loads(result.content[0].text)
            assert payload["success"], payload
            job = payload.get("crawl_job") or payload.get("job")
            job_ids.append(job["id"])
    return job_ids


async def crawl_state(conn: asyncpg.Connection, job_ids: list[str]) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT id::text, status, worker_id, attempts FROM crawl_jobs WHERE id = ANY($1::uuid[])", job_ids
    )


async def kill_due(conn: asyncpg.Connection, job_ids: list[str], args: argparse.Namespace, elapsed: float) -> bool:
    """Kill once a third of the site is crawled (mid-crawl), or after --kill-after seconds."""
    done = await conn.fetchval(
        "SELECT count(*) FROM crawl_frontier WHERE job_id = ANY($1::uuid[]) AND state = 'done'", job_ids
    )
    return done >= args.pages // 3 or elapsed >= args.kill_after


async def kill_one_server_and_worker(cluster: Cluster, conn: asyncpg.Connection, job_ids: list[str]) -> dict:
    port = list(cluster.servers)[1]
    cluster.servers[port].send_signal(signal.SIGKILL)
    running = [r for r in await crawl_state(conn, job_ids) if r["status"] == "running" and r["worker_id"]]
    victim = running[0]["worker_id"] if running else next(iter(cluster.workers))
    cluster.workers[victim].send_signal(signal.SIGKILL)
    pages = await conn.fetchval(
        "SELECT count(*) FROM crawl_frontier WHERE job_id = ANY($1::uuid[]) AND state = 'done'", job_ids
    )
    logger.info("killed server on port %d and worker %s after %d pages", port, victim, pages)
    return {"server_port": port, "worker": victim, "pages_done_at_kill": pages}


async def verify(conn: asyncpg.Connection, stats: Stats, site: FixtureSite) -> dict[str, Any]:
    fetched = Counter(r.path for r in site.request_log if r.path.startswith(SECTIONS))
    refetched = {path: n for path, n in fetched.items() if n > 1}
    per_url = await conn.fetch("SELECT url, count(*) AS n FROM documents WHERE url LIKE '%/s_/%' GROUP BY url")
    duplicates = [r["url"] for r in per_url if r["n"] > 1]
    lost = 0
    for doc_id, marker in stats.created:
        content = await conn.fetchval("SELECT content FROM documents WHERE id = $1::uuid", doc_id)
        if content is None or marker not in content:
            lost += 1
    frontier_dupes = await conn.fetchval(
        "SELECT count(*) FROM (SELECT url FROM crawl_frontier GROUP BY url HAVING count(*) > 1) d"
    )
    return {
        "urls_fetched": len(fetched),
        "urls_fetched_twice": len(refetched),
        "refetched": sorted(refetched)[:10],
        "pages_stored": len(per_url),
        "pages_stored_twice": len(duplicates),
        "frontier_urls_in_two_jobs": frontier_dupes,
        "documents_created_by_clients": len(stats.created),
        "lost_writes": lost,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    import pgserver

    work = Path(tempfile.mkdtemp(prefix="archivist-cluster-"))
    data_dir = CACHE_DIR / "cluster-db"
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    server = pgserver.get_server(data_dir / "pgdata", cleanup_mode="stop")
    database_url = server.get_uri()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "ARCHIVIST_DATA_DIR": str(work / "data"),
        "ARCHIVIST_ALLOWED_PATHS": str(work),
        "ARCHIVIST_CRAWL_ALLOW_PRIVATE": "true",
        "ARCHIVIST_CRAWL_DELAY_SECONDS": "0",
        "ARCHIVIST_CRAWL_PER_HOST_CONCURRENCY": str(args.per_host),
        "ARCHIVIST_JOB_HEARTBEAT_SECONDS": "1",
        "ARCHIVIST_JOB_STALE_SECONDS": "6",
        "ARCHIVIST_JOB_POLL_SECONDS": "0.2",
        "ARCHIVIST_LOG_LEVEL": "WARNING",
    }
    cluster = Cluster(database_url, env, work)
    site = FixtureSite(with_defaults=False).start()
    per_section = args.pages // len(SECTIONS)
    for section in SECTIONS:
        site.generate(per_section - 1, prefix=section)
    conn = await asyncpg.connect(database_url)
    stats, state = Stats(), {"job_ids": []}
    try:
        first = cluster.start_server()
        await wait_ready(first, cluster.servers[first])  # migrates the database once
        second = cluster.start_server()
        for i in range(3):
            cluster.start_worker(f"w{i}")
        await wait_ready(second, cluster.servers[second])
        ports = list(cluster.servers)
        started = time.monotonic()
        state["job_ids"] = await start_crawls(first, site, per_section)
        stop = asyncio.Event()
        agents = [Agent(i, ports, stats, state) for i in range(args.clients)]
        tasks = [asyncio.create_task(agent.run(stop)) for agent in agents]
        kill: dict[str, Any] = {}
        crawl_seconds = None
        while True:
            await asyncio.sleep(0.5)
            elapsed = time.monotonic() - started
            rows = await crawl_state(conn, state["job_ids"])
            if not kill and not args.no_kill and await kill_due(conn, state["job_ids"], args, elapsed):
                kill = await kill_one_server_and_worker(cluster, conn, state["job_ids"])
            if crawl_seconds is None and all(r["status"] in ("completed", "failed", "cancelled") for r in rows):
                crawl_seconds = elapsed
            if crawl_seconds is not None and elapsed >= args.duration:
                break
            if elapsed > args.duration + 600:
                raise RuntimeError("crawl did not finish within 10 minutes after the client run")
        stop.set()
        await asyncio.wait(tasks, timeout=CALL_TIMEOUT + 5)
        rows = await crawl_state(conn, state["job_ids"])
        checks = await verify(conn, stats, site)
        pages = await conn.fetchval(
            "SELECT count(*) FROM crawl_frontier WHERE job_id = ANY($1::uuid[]) AND state = 'done'", state["job_ids"]
        )
    finally:
        cluster.stop()
        site.stop()
        await conn.close()
        server.cleanup()
    per_tool = {
        op: {"calls": len(v), "p50_ms": round(percentile(v, 50), 1), "p95_ms": round(percentile(v, 95), 1)}
        for op, v in sorted(stats.latencies.items())
    }
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "topology": {"servers": 2, "workers": 3, "clients": args.clients, "per_host_concurrency": args.per_host},
        "crawl": {
            "jobs": [dict(r) for r in rows],
            "pages_done": pages,
            "crawl_seconds": round(crawl_seconds or 0, 1),
            "pages_per_second": round(pages / crawl_seconds, 2) if crawl_seconds else None,
        },
        "kill": kill,
        "checks": checks,
        "client_errors": sum(stats.errors.values()),
        "errors_by_kind": dict(stats.errors),
        "error_samples": stats.error_samples,
        "failovers": stats.failovers,
        "per_tool": per_tool,
    }


def print_report(r: dict[str, Any]) -> None:
    c, k = r["checks"], r["kill"]
    print(f"\nCluster: {r['topology']} on {r['machine']['cores']} cores ({r['machine']['cpu']})")
    jobs = ", ".join(f"{j['status']} (worker {j['worker_id']}, attempts {j['attempts']})" for j in r["crawl"]["jobs"])
    print(f"crawl: {r['crawl']['pages_done']} pages in {r['crawl']['crawl_seconds']} s; jobs: {jobs}")
    if k:
        print(
            f"killed mid-run: server :{k['server_port']}, worker {k['worker']} ({k['pages_done_at_kill']} pages done)"
        )
    print(
        f"URLs fetched: {c['urls_fetched']}, fetched twice: {c['urls_fetched_twice']} {c['refetched']}; "
        f"pages stored: {c['pages_stored']}, stored twice: {c['pages_stored_twice']}; "
        f"frontier URLs in two jobs: {c['frontier_urls_in_two_jobs']}"
    )
    print(
        f"client errors: {r['client_errors']} {r['errors_by_kind']}; failovers: {r['failovers']}; "
        f"documents created: {c['documents_created_by_clients']}, lost: {c['lost_writes']}"
    )
    for sample in r["error_samples"]:
        print(f"  error: {sample}")
    print(f"\n{'call':<16} {'calls':>6} {'p50 ms':>8} {'p95 ms':>8}")
    for op, t in r["per_tool"].items():
        print(f"{op:<16} {t['calls']:>6} {t['p50_ms']:>8} {t['p95_ms']:>8}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of client load (at least)")
    parser.add_argument("--kill-after", type=float, default=60.0, help="kill by then if a third is not crawled")
    parser.add_argument("--no-kill", action="store_true")
    parser.add_argument("--per-host", type=int, default=4, help="per-host concurrency, shared by all workers")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results-cluster.json")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("mcp").setLevel(logging.WARNING)
    args = parse_args(argv)
    result = asyncio.run(run(args))
    args.out.write_text(json.dumps(result, indent=2, default=str))
    print_report(result)


if __name__ == "__main__":
    main()
