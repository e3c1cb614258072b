"""Per-call latency of two checkouts side by side, through the real MCP client over streamable HTTP.

Each checkout serves `archivist serve --http` on its own embedded PostgreSQL (its own data directory),
gets the same small corpus, and then the same calls alternate between the two servers (old, new, new,
old, ...) so drift in machine load falls on both. Prints p50 / p95 per call and checkout.

    .venv/bin/python bench/ab_latency.py --old /path/to/old/checkout --new . [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
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

#: `archivist` of any checkout: cli.main where it exists (this round on), else server.main
ENTRY = (
    "import sys, importlib.util\n"
    "sys.argv = ['archivist', *sys.argv[1:]]\n"
    "mod = 'cli' if importlib.util.find_spec('cli') and hasattr(__import__('cli'), 'main') else 'server'\n"
    "__import__(mod).main()\n"
)
TOPICS = {
    f"Topic {i}": f"# Topic {i}\n\n" + " ".join(f"word{(i * 7 + j) % 97} lighthouse lens saffron" for j in range(60))
    for i in range(30)
}
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "search hybrid": ("search_knowledge_base", {"query": "how do lighthouse lenses work", "match_count": 5}),
    "search vector": (
        "search_knowledge_base",
        {"query": "saffron lens", "match_count": 5, "search_type": "vector"},
    ),
    "manage_source list": ("manage_source", {"action": "list"}),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(checkout: Path, data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ARCHIVIST_DATA_DIR": str(data_dir), "PYTHONPATH": str(checkout), "HF_HUB_OFFLINE": "1"}
    env["ARCHIVIST_RATE_PER_MINUTE"] = "1000000"  # the old shared local bucket would throttle the run
    env.pop("DATABASE_URL", None)
    command = [sys.executable, "-c", ENTRY, "serve", "--http", "--port", str(port)]
    return subprocess.Popen(command, cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def wait_ready(url: str, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient() as http:
        while time.monotonic() < deadline:
            try:
                if (await http.get(url + "/healthz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.5)
    raise SystemExit(f"{url} did not become ready")


async def load_corpus(client: Client) -> None:
    for title, content in TOPICS.items():
        await client.call_tool("manage_document", {"action": "create", "title": title, "content": content})


async def timed(client: Client, tool: str, arguments: dict[str, Any]) -> float:
    started = time.perf_counter()
    result = await client.call_tool(tool, arguments)
    elapsed = (time.perf_counter() - started) * 1000
    if result.is_error:
        raise SystemExit(f"{tool} failed: {result.content[0].text[:300]}")
    return elapsed


async def run(old: Path, new: Path, calls: int) -> None:
    ports = {"old": free_port(), "new": free_port()}
    with tempfile.TemporaryDirectory() as tmp:
        servers = {name: start(path, Path(tmp) / name, ports[name]) for name, path in (("old", old), ("new", new))}
        try:
            urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
            await asyncio.gather(*(wait_ready(u) for u in urls.values()))
            async with Client(urls["old"] + "/mcp") as a, Client(urls["new"] + "/mcp") as b:
                clients = {"old": a, "new": b}
                await asyncio.gather(load_corpus(a), load_corpus(b))
                times: dict[tuple[str, str], list[float]] = {}
                for i in range(calls):
                    order = ("old", "new") if i % 2 == 0 else ("new", "old")
                    for label, (tool, arguments) in CALLS.items():
                        for name in order:
                            times.setdefault((label, name), []).append(await timed(clients[name], tool, arguments))
            print(f"{'call':22} {'checkout':8} {'p50 ms':>8} {'p95 ms':>8}")
            for (label, name), values in sorted(times.items()):
                values = values[5:]  # warm-up
                p95 = statistics.quantiles(values, n=20)[18]
                print(f"{label:22} {name:8} {statistics.median(values):8.1f} {p95:8.1f}")
        finally:
            for server in servers.values():
                server.terminate()
            for server in servers.values():
                server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", type=Path, required=True, help="the checkout to compare against")
    parser.add_argument("--new", type=Path, default=Path("."), help="this checkout (default .)")
    parser.add_argument("--calls", type=int, default=200, help="rounds of calls per checkout")
    args = parser.parse_args()
    asyncio.run(run(args.old.resolve(), args.new.resolve(), args.calls))


if __name__ == "__main__":
    main()
