"""Bounded memory during a crawl (issue 18): page trees alive at once, malloc arenas, trimming."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from services.core import memory
from services.core.settings import Settings
from services.fetchers import crawl4ai_http
from services.fetchers.crawl4ai_http import Crawl4aiHttpFetcher
from services.pages import ExtractedPage
from tests.support.fixture_site import FixtureSite, html_page


@pytest.fixture(autouse=True)
def _restore_crawl4ai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRAWL4_AI_BASE_DIRECTORY", os.environ.get("CRAWL4_AI_BASE_DIRECTORY", ""))


async def test_a_fetcher_extracts_at_most_one_page_per_core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """However many pages a crawl has in flight, only `extraction_slots()` page trees exist at once
    (on main, every fetch extracted at once, up to the default executor's 6 threads on 2 cores)."""
    real_extract = crawl4ai_http.extract_page
    lock = threading.Lock()
    running = {"now": 0, "peak": 0}

    def slow_extract(*args: Any) -> ExtractedPage:
        with lock:
            running["now"] += 1
            running["peak"] = max(running["peak"], running["now"])
        try:
            time.sleep(0.2)
            return real_extract(*args)
        finally:
            with lock:
                running["now"] -= 1

    monkeypatch.setattr(crawl4ai_http, "extract_page", slow_extract)
    settings = Settings(_env_file=None, crawl_allow_private=True, data_dir=tmp_path, crawl_page_timeout=20.0)
    with FixtureSite() as site:
        for i in range(8):
            site.set_page(f"/p{i}", html_page(f"Page {i}", [f"Paragraph of page {i}, long enough to keep."], []))
        fetcher = Crawl4aiHttpFetcher(settings)
        try:
            results = await asyncio.gather(*(fetcher.fetch(site.url_for(f"/p{i}")) for i in range(8)))
        finally:
            await fetcher.close()
    assert all(r.ok for r in results), [r.error for r in results]
    assert all(f"Paragraph of page {i}" in r.markdown for i, r in enumerate(results))
    cores = len(os.sched_getaffinity(0))
    assert running["peak"] <= min(cores, crawl4ai_http.extraction_slots())


async def test_trimmer_trims_every_n_ticks_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    loop_thread = threading.get_ident()
    calls: list[int] = []

    def fake_trim() -> bool:
        calls.append(threading.get_ident())
        return True

    monkeypatch.setattr(memory, "trim", fake_trim)
    trimmer = memory.Trimmer(every=3)
    for _ in range(7):
        await trimmer.tick()
    assert len(calls) == 2 and loop_thread not in calls


def test_malloc_helpers_are_safe_to_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """On glibc they apply; an operator's MALLOC_ARENA_MAX wins; elsewhere they are no-ops."""
    assert isinstance(memory.trim(), bool)
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert memory.limit_malloc_arenas() is False
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    assert memory.limit_malloc_arenas() is (memory._libc() is not None)
