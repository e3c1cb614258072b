"""Shared parts of the chaos benchmark (bench/chaos.py): the result table, an `archivist serve --http`
subprocess, tool calls through the real MCP client, and integrity checks straight in PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from mcp import Client

from bench.common import free_port

ROOT = Path(__file__).resolve().parent.parent
ARCHIVIST = shutil.which("archivist", path=str(Path(sys.executable).parent)) or "archivist"
ROWS: list[tuple[str, str, str]] = []


def row(name: str, measured: str, held: bool) -> None:
    ROWS.append((name, measured, "yes" if held else "NO"))
    print(f"  {name}: {measured} -> {'held' if held else 'NOT HELD'}", file=sys.stderr)


class Server:
    """One `archivist serve --http` subprocess (`worker`: with its in-process crawl worker)."""

    def __init__(self, env: dict[str, str], worker: bool = False) -> None:
        self.env, self.port, self.proc, self.worker = env, free_port(), None, worker

    async def start(self) -> Server:
        cmd = [ARCHIVIST, "serve", "--http", "--port", str(self.port)]
        if not self.worker:
            cmd.append("--no-worker")
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

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

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


def base_env(data_dir: Path, allowed: Path, database_url: str | None = None, **settings: str) -> dict[str, str]:
    """The server's environment: no inherited ARCHIVIST_* settings; `settings` as ARCHIVIST_<NAME>."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHIVIST_") and k != "DATABASE_URL"}
    env.update(ARCHIVIST_DATA_DIR=str(data_dir), ARCHIVIST_ALLOWED_PATHS=str(allowed), ARCHIVIST_LOG_LEVEL="WARNING")
    env["HF_HUB_OFFLINE"] = "1"
    env.update({f"ARCHIVIST_{k.upper()}": v for k, v in settings.items()})
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


async def tool(client: Client, name: str, wait: float = 30, **args: Any) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    result = await asyncio.wait_for(client.call_tool(name, args), wait)
    return json.loads(result.content[0].text), time.monotonic() - started


async def integrity(dsn: str) -> tuple[int, int, int]:
    """(documents, documents without chunks, documents whose chunk_count is not their real chunk count)."""
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
