"""End-to-end crawl throughput: pages/s and chunks/s on a generated local site, politeness delays off.

    .venv/bin/python bench/crawl.py --pages 500 [--concurrency 4] [--out bench/.cache/crawl.json]

A generated site of `--pages` HTML pages (tests/support/fixture_site.py `generate`: a 5-ary tree with parent
and sibling links, three paragraphs of ~60 words per page) is served on 127.0.0.1, and one recursive
crawl job covering every page is run by an in-process worker (`services.worker.run_worker`), as the
server runs it: discovery (robots.txt, sitemap.xml, llms.txt), frontier in Postgres, HTTP fetch and
HTML->markdown with crawl4ai, chunking, embedding and storage. The clock runs from queueing the job
to its completion; the embedder and crawl4ai are loaded before it starts. The peak resident memory of
this process (the server: event loop, page pipeline, model) is sampled every half second.

The database is DATABASE_URL when set, else an embedded PostgreSQL under bench/.cache/crawl-db. The
crawled source is deleted afterwards, so re-runs measure the same work (every page new).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import CACHE_DIR, machine_info  # noqa: E402
from models.jobs import CrawlJob, CrawlRequest  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist, run_worker  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from services.fetchers import create_fetcher  # noqa: E402
from tests.support.fixture_site import FixtureSite  # noqa: E402

logger = logging.getLogger("bench.crawl")

FANOUT = 5  # tests/support/fixture_site.py generates a 5-ary tree


def tree_depth(pages: int, fanout: int = FANOUT) -> int:
    """Links from the index to the deepest generated page (the index links to page 0)."""
    depth, level, covered = 1, 1, 1
    while covered < pages:
        level *= fanout
        covered += level
        depth += 1
    return depth


class PeakRss:
    """Samples this process's resident memory in a thread; `peak_mb` is the largest seen."""

    def __init__(self, interval: float = 0.5) -> None:
        import psutil

        self._process = psutil.Process()
        self._interval = interval
        self._stop = threading.Event()
        self.peak = 0
        self._thread = threading.Thread(target=self._run, name="peak-rss", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.peak = max(self.peak, self._process.memory_info().rss)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._process.memory_info().rss)
        return round(self.peak / 2**20)


def bench_settings(args: argparse.Namespace) -> Settings:
    """Crawl settings for the run: no politeness delay, private (loopback) targets allowed."""
    database_url = args.database_url or os.environ.get("DATABASE_URL")
    return Settings(
        _env_file=None,
        database_url=database_url,
        data_dir=CACHE_DIR / "crawl-db",
        crawl_allow_private=True,
        crawl_delay_seconds=0,
        crawl_concurrency=args.concurrency,
        crawl_per_host_concurrency=args.concurrency,
        crawl_max_pages=args.pages + 1,
        crawl_max_depth=max(5, tree_depth(args.pages)),
        job_poll_seconds=0.1,
        run_worker=False,
    )


async def warm_up(settings: Settings) -> None:
    """Load crawl4ai before the clock starts (the embedder is loaded by Archivist.open)."""
    fetcher = await asyncio.to_thread(create_fetcher, settings)
    await fetcher.close()


async def crawl_site(app: Archivist, site: FixtureSite, pages: int) -> tuple[CrawlJob, float]:
    """Queue one crawl of the whole generated site and run it with an in-process worker."""
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(app, stop, "bench"))
    began = time.perf_counter()
    started = await app.crawl.start(
        CrawlRequest(
            url=site.url_for("/gen/"),
            title=f"bench-crawl-{site.port}",
            recursive=True,
            max_depth=tree_depth(pages),
            max_pages=pages + 1,
        )
    )
    try:
        job = await app.jobs.wait(started.job.id, timeout=3600, interval=0.2)
    finally:
        elapsed = time.perf_counter() - began
        stop.set()
        await worker
    return job, elapsed


def summarize(job: CrawlJob, elapsed: float, settings: Settings, pages: int, peak_rss_mb: int) -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "site_pages": pages + 1,
        "status": job.status,
        "pages_crawled": job.pages_crawled,
        "pages_failed": job.pages_failed,
        "chunks_embedded": job.chunks_embedded,
        "seconds": round(elapsed, 2),
        "pages_per_second": round(job.pages_crawled / elapsed, 2),
        "chunks_per_second": round(job.chunks_embedded / elapsed, 2),
        "peak_rss_mb": peak_rss_mb,
        "settings": {
            "crawl_concurrency": settings.crawl_concurrency,
            "crawl_per_host_concurrency": settings.crawl_per_host_concurrency,
            "crawl_delay_seconds": settings.crawl_delay_seconds,
            "embedding_model": settings.embedding_model,
            "chunk_size": settings.chunk_size,
        },
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = bench_settings(args)
    rss = PeakRss()
    app = await Archivist.open(settings)
    site = FixtureSite(with_defaults=False).start()
    try:
        site.generate(args.pages)
        await warm_up(settings)
        job, elapsed = await crawl_site(app, site, args.pages)
        await app.sources.delete(job.source_id)
    finally:
        site.stop()
        await app.close()
    return summarize(job, elapsed, settings, args.pages, rss.stop())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=500, help="generated pages (plus an index page)")
    parser.add_argument("--concurrency", type=int, default=4, help="crawl_concurrency and per-host concurrency")
    parser.add_argument("--database-url", default=None, help="default: DATABASE_URL, else an embedded server")
    parser.add_argument("--out", type=Path, default=None, help="also write the figures to this JSON file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    with use_scope(Scope.owner()):  # a benchmark runs as the local owner
        result = asyncio.run(run(args))
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    print(
        f"\n{result['pages_crawled']} pages, {result['chunks_embedded']} chunks in {result['seconds']} s: "
        f"{result['pages_per_second']} pages/s, {result['chunks_per_second']} chunks/s ({result['status']}); "
        f"peak RSS {result['peak_rss_mb']} MB"
    )


if __name__ == "__main__":
    main()
