"""Crawl job worker (being written)."""

from __future__ import annotations

import asyncio
from typing import Any


async def run_worker(app: Any, stop: asyncio.Event, worker_id: str | None = None) -> None:
    await stop.wait()
