"""Docs quality while a source is only keyword-searchable (issue 18): nothing embedded yet.

    nice -n 10 .venv/bin/python bench/keyword_only.py [--sets postgresql,django] [--max-pages 100] [--reuse]

Each doc set is served on 127.0.0.1 (bench/docs.py's server) and crawled through the real job path with
the embedding backlog runner off, so every chunk stays pending (keyword-searchable, no vector). Once every
page is stored the crawl is stopped and the set's docs questions are asked with `hybrid` (the default):
page-level hit@5 / MRR@10, as bench/docs.py and bench/arrival.py score them. Quality does not depend on
machine load, so this needs no idle machine. `--reuse` asks again over the sources a previous run kept
in bench/.cache/keyword-only-db (for search-side changes). A missing doc set names its apt package.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.arrival import available_sets, searchable  # noqa: E402
from bench.common import CACHE_DIR  # noqa: E402
from bench.docs import DOC_SETS, QUESTIONS, ask, serve  # noqa: E402
from bench.metrics import hit_scores  # noqa: E402
from models.jobs import CrawlRequest  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist, run_worker  # noqa: E402
from services.core.settings import Settings  # noqa: E402

DATA_DIR = CACHE_DIR / "keyword-only-db"


def bench_settings(args: argparse.Namespace) -> Settings:
    return Settings(
        _env_file=None,
        database_url=args.database_url or os.environ.get("DATABASE_URL"),
        data_dir=args.data_dir,
        crawl_allow_private=True,
        crawl_max_pages=max(args.max_pages, 1),
        crawl_delay_seconds=0,
        crawl_concurrency=4,
        crawl_per_host_concurrency=4,
        job_poll_seconds=0.1,
        run_worker=False,
        embedding_backlog_lanes=0,  # nothing is embedded: every chunk stays pending
    )


async def crawl_until_searchable(app: Archivist, name: str, base: str, max_pages: int) -> Any:
    """Crawl the set until every page is stored (keyword-searchable), then stop the job."""
    _, _, start, _ = DOC_SETS[name]
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(app, stop, f"bench-kw-{name}"))
    try:
        started = await app.crawl.start(
            CrawlRequest(url=base + start, title=f"bench-kw-{name}", recursive=True, max_depth=20, max_pages=max_pages)
        )
        deadline = time.monotonic() + 3600
        while not searchable(job := await app.jobs.get(started.job.id)) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        return job.source_id
    finally:
        stop.set()
        await worker


async def kept_source(app: Archivist, name: str) -> tuple[Any, str] | None:
    row = await app.db.pool.fetchrow(
        "SELECT s.id, min(d.url) AS url FROM sources s JOIN documents d ON d.source_id = s.id "
        "WHERE s.title = $1 GROUP BY s.id",
        f"bench-kw-{name}",
    )
    if row is None:
        return None
    match = re.match(r"https?://[^/]+/", row["url"] or "")
    return (row["id"], match.group(0)) if match else None


async def run(args: argparse.Namespace) -> dict[str, Any]:
    questions = json.loads(QUESTIONS.read_text())["questions"]
    app = await Archivist.open(bench_settings(args))
    results: dict[str, Any] = {}
    try:
        for name in available_sets([s.strip() for s in args.sets.split(",") if s.strip()]):
            asked = [q for q in questions if q["set"] == name]
            kept = await kept_source(app, name) if args.reuse else None
            if kept is None:
                _, directory, _, _ = DOC_SETS[name]
                server = serve(directory, [t for q in asked for t in q["targets"]])
                base = f"http://127.0.0.1:{server.server_address[1]}/"
                try:
                    source_id = await crawl_until_searchable(app, name, base, args.max_pages)
                finally:
                    server.shutdown()
            else:
                source_id, base = kept
            pending = await app.search.pending_embeddings([source_id])
            chunks = await app.db.pool.fetchval("SELECT count(*) FROM chunks WHERE source_id = $1", source_id)
            answer = await ask(app, source_id, base, [q["q"] for q in asked], "hybrid")
            scores = hit_scores(answer["rankings"], [q["targets"] for q in asked])
            results[name] = {"questions": len(asked), "chunks": chunks, "pending": pending, **scores}
    finally:
        await app.close()
    return results


def report(results: dict[str, Any]) -> str:
    lines = ["| set | chunks (pending) | hit@1 | hit@5 | MRR@10 |", "|---|---|---|---|---|"]
    for name, r in results.items():
        lines.append(
            f"| {name} ({r['questions']} q) | {r['chunks']} ({r['pending']}) | {r['hit@1']} | {r['hit@5']} "
            f"| {r['mrr@10']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="postgresql,django,mkdocs", help=f"comma-separated, of {', '.join(DOC_SETS)}")
    parser.add_argument("--max-pages", type=int, default=100, help="pages crawled per set")
    parser.add_argument("--reuse", action="store_true", help="ask again over the sources a previous run kept")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR, help="the embedded database's directory")
    parser.add_argument("--database-url", default=None, help="default: DATABASE_URL, else an embedded server")
    parser.add_argument("--out", type=Path, default=CACHE_DIR / "keyword-only.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    with use_scope(Scope.owner()):  # a benchmark runs as the local owner
        results = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(report(results))


if __name__ == "__main__":
    main()
