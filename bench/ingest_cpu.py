"""CPU utilisation of each ingestion path (issue 18): CPU seconds ÷ (wall seconds × cores).

    nice -n 10 .venv/bin/python bench/ingest_cpu.py [--pages 100] [--files 200] [--beir-docs 300]

Runs, one after another on one fresh embedded PostgreSQL, each path to the end of its embedding (a
crawl or sync job completes once its chunks are embedded; a directory ingest embeds before it returns):

- crawl: a generated site of `--pages` pages on 127.0.0.1 (tests/support/fixture_site.py), one recursive job
  run by an in-process worker (which also runs the embedding backlog);
- folder sync: `--files` markdown notes bound as a folder source and synced by the worker;
- directory ingest: the same notes through `DocumentService.create_from_directory` (`archivist ingest`);
- BEIR ingestion: the first `--beir-docs` SciFact abstracts through bench/beir_ingest.py (texts embedded
  ahead in large batches, then `DocumentService.ingest`).

For each it prints wall seconds, CPU seconds of this process (the server: event loop, page pipeline,
model threads) and its children (the parser pool), CPU seconds of PostgreSQL's processes, utilisation
of all cores, and the server's peak RSS during the path. On a shared machine the utilisation is
bounded by what the scheduler gives this process, so compare paths within one run, not with an idle
machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.arrival_probe import Probe  # noqa: E402
from bench.beir_data import read_corpus  # noqa: E402
from bench.beir_ingest import CachingEmbedder, ingest_corpus  # noqa: E402
from bench.common import CACHE_DIR, machine_info  # noqa: E402
from bench.crawl import tree_depth  # noqa: E402
from bench.sync import note  # noqa: E402
from models.jobs import CrawlRequest  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist, run_worker  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from tests.support.fixture_site import FixtureSite  # noqa: E402

logger = logging.getLogger("bench.ingest_cpu")
#: SciFact's corpus beside the checkout (../shared/data, as bench/beir.py's usage), or beside a worktree.
SCIFACT = next(
    (p for p in (r / "shared/data/scifact/corpus.jsonl" for r in (ROOT.parent, ROOT.parent.parent)) if p.is_file()),
    ROOT.parent / "shared/data/scifact/corpus.jsonl",
)


async def with_worker(app: Archivist, work: Callable[[], Awaitable[Any]]) -> Any:
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(app, stop, "bench-ingest-cpu"))
    try:
        return await work()
    finally:
        stop.set()
        await worker


async def crawl(app: Archivist, pages: int) -> str:
    site = FixtureSite(with_defaults=False).start()
    try:
        site.generate(pages)
        started = await app.crawl.start(
            CrawlRequest(
                url=site.url_for("/gen/"),
                title="cpu-crawl",
                recursive=True,
                max_depth=tree_depth(pages),
                max_pages=pages + 1,
            )
        )
        job = await with_worker(app, lambda: app.jobs.wait(started.job.id, timeout=3600, interval=0.2))
    finally:
        site.stop()
    return f"{job.pages_crawled} pages, {job.chunks_embedded} chunks"


async def folder_sync(app: Archivist, folder: Path) -> str:
    config, _ = await app.sync.bind(str(folder), title="cpu-sync")
    started = await app.sync.queue(config.source_id)
    job = await with_worker(app, lambda: app.jobs.wait(started.job.id, 3600, interval=0.1))
    return f"{job.documents_created} files, {job.chunks_embedded} chunks"


async def directory_ingest(app: Archivist, folder: Path) -> str:
    source, _ = await app.sources.get_or_create("cpu-directory")
    results, failures, _ = await app.documents.create_from_directory(source.id, folder)
    stats = await app.sources.stats(source.id)
    return f"{len(results)} files ({len(failures)} failed), {stats.chunks_count} chunks"


async def beir_ingest(app: Archivist, corpus_path: Path, docs: int) -> str:
    corpus = read_corpus(corpus_path)[:docs]
    embedder = CachingEmbedder(app.embedder)
    beir_app = Archivist(app.settings, app.db, embedder)  # the bench's caching embedder, same database
    source = await app.sources.create("cpu-beir")
    report = await ingest_corpus(beir_app, embedder, source.id, corpus)
    return f"{report.documents} abstracts, {report.chunks} chunks"


async def measure(probe: Probe, name: str, work: Awaitable[str]) -> dict[str, Any]:
    overall_peak, probe.peak_server_rss = probe.peak_server_rss, 0
    first = probe.sample()
    began = time.perf_counter()
    what = await work
    wall = time.perf_counter() - began
    last = probe.sample()
    cpu = probe.utilisation(first, last)
    row = {
        "path": name,
        "what": what,
        "wall_s": round(wall, 1),
        "server_cpu_s": round(last.server_cpu - first.server_cpu, 1),
        "postgres_cpu_s": round(max(last.postgres_cpu - first.postgres_cpu, 0.0), 1),
        **{f"utilisation_{k}": v for k, v in cpu.items()},
        "peak_server_rss_mb": round(probe.peak_server_rss / 2**20),
    }
    probe.peak_server_rss = max(overall_peak, probe.peak_server_rss)
    logger.warning("%s", row)
    return row


async def run(args: argparse.Namespace) -> dict[str, Any]:
    info = machine_info()
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="ingest-cpu-db-", dir=CACHE_DIR))
    folder = data_dir / "notes"
    for i in range(args.files):
        path = folder / f"group{i % 10}" / f"note{i:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(note(i + k * args.files) for k in range(4)))  # ~250 words, 4 distinct notes
    settings = Settings(
        _env_file=None,
        database_url=os.environ.get("DATABASE_URL"),
        data_dir=data_dir,
        allowed_paths=[data_dir],
        crawl_allow_private=True,
        crawl_delay_seconds=0,
        crawl_max_pages=args.pages + 1,
        crawl_max_depth=max(5, tree_depth(args.pages)),
        job_poll_seconds=0.1,
        run_worker=False,
    )
    app = await Archivist.open(settings)
    probe = Probe(None if settings.database_url else data_dir / "pgdata")
    rows = []
    ticker = asyncio.create_task(_sample_forever(probe))
    try:
        rows.append(await measure(probe, "crawl", crawl(app, args.pages)))
        rows.append(await measure(probe, "folder sync", folder_sync(app, folder)))
        rows.append(await measure(probe, "directory ingest", directory_ingest(app, folder)))
        if args.scifact.is_file() and args.beir_docs:
            rows.append(await measure(probe, "BEIR ingestion", beir_ingest(app, args.scifact, args.beir_docs)))
    finally:
        ticker.cancel()
        await app.close()
        if not settings.database_url:
            import pgserver

            pgserver.get_server(data_dir / "pgdata", cleanup_mode="delete").cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)
    info["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return {"machine": info, "peak_server_rss_mb": round(probe.peak_server_rss / 2**20), "rows": rows}


async def _sample_forever(probe: Probe) -> None:
    while True:
        probe.sample()  # peak RSS between the measured moments
        await asyncio.sleep(1.0)


def report(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
        f"{m['cores']} cores; load average before {m['load_average']}, after {m['load_average_after']}; "
        f"peak server RSS {results['peak_server_rss_mb']} MB",
        "",
        "| path | work | wall s | server CPU s | PostgreSQL CPU s | utilisation server + PG = total | peak RSS |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        lines.append(
            f"| {r['path']} | {r['what']} | {r['wall_s']} | {r['server_cpu_s']} | {r['postgres_cpu_s']} | "
            f"{r['utilisation_server']:.0%} + {r['utilisation_postgres']:.0%} = {r['utilisation_total']:.0%} | "
            f"{r['peak_server_rss_mb']} MB |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=100, help="generated pages to crawl")
    parser.add_argument("--files", type=int, default=200, help="markdown notes to sync and to ingest")
    parser.add_argument("--beir-docs", type=int, default=300, help="SciFact abstracts (0: skip)")
    parser.add_argument("--scifact", type=Path, default=SCIFACT, help="a BEIR corpus.jsonl")
    parser.add_argument("--out", type=Path, default=CACHE_DIR / "ingest_cpu.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    with use_scope(Scope.owner()):
        results = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(report(results))


if __name__ == "__main__":
    main()
