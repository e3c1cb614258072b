"""Audit-log overhead per tool call, through the real MCP client over streamable HTTP.

Two `archivist serve --http` processes on one embedded PostgreSQL: one with the audit log on (the
default), one with ARCHIVIST_AUDIT_ENABLED=false. The same calls alternate between them (on, off, off,
on, ...) so drift in machine load falls on both; client-side wall time per call is compared.

    flock /tmp/archivist-bench.lock nice -n 0 .venv/bin/python bench/audit_overhead.py [--calls 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from mcp import Client

ARCHIVIST = shutil.which("archivist", path=str(Path(sys.executable).parent)) or "archivist"
CALLS = {
    "manage_source list": ("manage_source", {"action": "list"}),
    "search (vector)": ("search_knowledge_base", {"query": "tide gauge calibration", "search_type": "vector"}),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def start(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [ARCHIVIST, "serve", "--http", "--port", str(port), "--no-worker"], env=env, stdout=subprocess.DEVNULL
    )
    async with httpx.AsyncClient() as http:
        for _ in range(1200):
            try:
                if (await http.get(f"http://127.0.0.1:{port}/healthz", timeout=1)).status_code == 200:
                    return proc, port
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit("server did not start")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def timed(client: Client, tool: str, args: dict[str, Any]) -> float:
    started = time.perf_counter()
    result = await client.call_tool(tool, args)
    elapsed = (time.perf_counter() - started) * 1000
    assert not result.is_error, result.content
    return elapsed


async def record_cost(n: int = 20_000) -> float:
    """Microseconds the request path spends in AuditService.record (redact + JSON + enqueue); the loop
    does not yield meanwhile, so the writer task (which would need a database) never runs."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from services.access.audit import AuditService

    audit = AuditService(db=None, max_queue=n + 1)  # type: ignore[arg-type]
    args = {"action": "create", "source_id": "3f1c0000-0000-0000-0000-000000000000", "content": "x" * 5000}
    started = time.perf_counter()
    for _ in range(n):
        audit.record("manage_document", "create", "alice", ["docs"], args, None, 12.5, 900)
    elapsed = (time.perf_counter() - started) / n * 1e6
    if audit._task is not None:
        audit._task.cancel()
    return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per tool per server")
    args = parser.parse_args()
    import pgserver

    with tempfile.TemporaryDirectory(prefix="audit-bench-") as tmp:
        work = Path(tmp)
        pg = pgserver.get_server(work / "pg", cleanup_mode="stop")
        procs: list[subprocess.Popen[bytes]] = []
        try:
            pg.psql("CREATE DATABASE audit;")
            env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHIVIST_") and k != "DATABASE_URL"}
            env.update(
                DATABASE_URL=pg.get_uri(database="audit"),
                ARCHIVIST_DATA_DIR=str(work / "data"),
                ARCHIVIST_ALLOWED_PATHS=str(work),
                ARCHIVIST_LOG_LEVEL="WARNING",
                ARCHIVIST_RATE_PER_MINUTE="1000000",
                HF_HUB_OFFLINE="1",
            )
            on, port_on = await start(env)
            procs.append(on)
            off, port_off = await start({**env, "ARCHIVIST_AUDIT_ENABLED": "false"})
            procs.append(off)
            results: dict[str, dict[str, list[float]]] = {name: {"on": [], "off": []} for name in CALLS}
            async with (
                Client(f"http://127.0.0.1:{port_on}/mcp") as c_on,
                Client(f"http://127.0.0.1:{port_off}/mcp") as c_off,
            ):
                made = await c_on.call_tool("manage_source", {"action": "create", "title": "Bench"})
                sid = made.structured_content["source"]["id"]
                for i in range(20):
                    text = f"Note {i}: calibrate the tide gauge float before the spring tide, step {i}."
                    await c_on.call_tool("manage_document", {"action": "create", "source_id": sid, "content": text})
                for name, (tool, targs) in CALLS.items():
                    for _ in range(10):  # warm-up, not counted
                        await timed(c_on, tool, targs)
                        await timed(c_off, tool, targs)
                    for i in range(args.calls):
                        pair = [("on", c_on), ("off", c_off)]
                        for label, client in pair if i % 2 == 0 else pair[::-1]:
                            results[name][label].append(await timed(client, tool, targs))
            async with httpx.AsyncClient() as http:
                audit = (await http.get(f"http://127.0.0.1:{port_on}/healthz")).json()["audit"]
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=20)
            pg.cleanup()
    print(f"calls per tool per server: {args.calls}; load average: {os.getloadavg()[0]:.2f}")
    print("| call | audit | p50 ms | p95 ms |\n|---|---|---|---|")
    for name, by in results.items():
        for label in ("on", "off"):
            print(f"| {name} | {label} | {statistics.median(by[label]):.2f} | {pct(by[label], 95):.2f} |")
    print("\n| call | p50 difference (on - off) ms | p95 difference ms |\n|---|---|---|")
    for name, by in results.items():
        d50 = statistics.median(by["on"]) - statistics.median(by["off"])
        d95 = pct(by["on"], 95) - pct(by["off"], 95)
        print(f"| {name} | {d50:+.2f} | {d95:+.2f} |")
    print(f"\naudit writer on the audited server: {audit}")
    print(f"AuditService.record on the request path: {await record_cost():.1f} us per call (5,000-char argument)")


if __name__ == "__main__":
    asyncio.run(main())
