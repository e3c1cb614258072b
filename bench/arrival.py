"""Arrival benchmark (issue 18): how soon a crawled documentation set can answer, and how well.

    nice -n 10 .venv/bin/python bench/arrival.py [--sets postgresql,django] [--max-pages 5000]

Each doc set (Debian's postgresql-doc-15 and python-django-doc; a missing one names its apt package)
is served from /usr/share/doc on 127.0.0.1 (bench/docs.py's server: its sitemap lists the questions'
target pages first) and crawled from its index through the real crawl service (JobService.start + an
in-process worker, which runs the embedding backlog runner), into a fresh embedded PostgreSQL.

While the crawl runs, the job's status is polled (every --poll seconds) and the set's first question is
asked until it returns a result. Printed per set: time to the first keyword hit; time until every page
is keyword-searchable (the frontier is settled and every stored page's chunks are in the index); time
until every chunk is embedded (the job completes); pages/s and chunks/s of each phase; CPU utilisation
of all cores (this process = the server, and PostgreSQL's processes) per phase; peak RSS; and hybrid
hit@5 / MRR@10 of the set's docs questions (bench/docs_questions.json) at three moments: all pages
keyword-searchable, half the chunks embedded, every chunk embedded (the share embedded when the
questions were asked is shown: embedding goes on while they are asked).
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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.arrival_probe import Probe, Sample  # noqa: E402
from bench.common import CACHE_DIR, cpu_line, machine_info  # noqa: E402
from bench.docs import DOC_SETS, QUESTIONS, ask, serve  # noqa: E402
from bench.metrics import hit_scores  # noqa: E402
from models.jobs import CrawlJob, CrawlRequest  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist, run_worker  # noqa: E402
from services.core.settings import Settings  # noqa: E402

logger = logging.getLogger("bench.arrival")
ARRIVAL_SETS = ("postgresql", "django")
MOMENTS = ("all keyword-searchable", "half embedded", "fully embedded")


@dataclass
class Timeline:
    """What happened when (seconds since the crawl started) for one set."""

    first_hit: float | None = None
    searchable: float | None = None
    embedded: float | None = None
    samples: dict[str, Sample] = field(default_factory=dict)
    jobs: dict[str, CrawlJob] = field(default_factory=dict)
    quality: dict[str, dict[str, Any]] = field(default_factory=dict)


def bench_settings(args: argparse.Namespace, data_dir: Path) -> Settings:
    return Settings(
        _env_file=None,
        database_url=args.database_url or os.environ.get("DATABASE_URL"),
        data_dir=data_dir,
        crawl_allow_private=True,
        crawl_max_pages=max(args.max_pages, 1),
        crawl_delay_seconds=0,
        crawl_concurrency=args.concurrency,
        crawl_per_host_concurrency=args.concurrency,
        job_poll_seconds=0.1,
        run_worker=False,
    )


def remove_embedded(data_dir: Path) -> None:
    """Stop the fresh embedded PostgreSQL (this process started it), then delete its directory."""
    import pgserver

    pgserver.get_server(data_dir / "pgdata", cleanup_mode="delete").cleanup()
    shutil.rmtree(data_dir, ignore_errors=True)


def available_sets(wanted: list[str]) -> list[str]:
    found = []
    for name in wanted:
        package, directory, _, _ = DOC_SETS[name]
        if (directory / "index.html").is_file():
            found.append(name)
        else:
            print(f"{name}: {directory} is missing; install it with: apt-get install -y {package}", file=sys.stderr)
    return found


def searchable(job: CrawlJob) -> bool:
    """Every page the crawl will store is stored (keyword-searchable); embedding may go on."""
    return job.finished or (job.pages_pending == 0 and job.pages_crawled > 0)


def embedded_share(job: CrawlJob) -> float:
    written = job.chunks_embedded + job.chunks_pending
    return job.chunks_embedded / written if written else 0.0


async def quality(app: Archivist, job: CrawlJob, base: str, asked: list[dict[str, Any]], at: float) -> dict[str, Any]:
    """Hybrid hit@5 / MRR@10 of the set's questions now, with the share of chunks embedded meanwhile."""
    before = embedded_share(await app.jobs.get(job.id))
    answer = await ask(app, job.source_id, base, [q["q"] for q in asked], "hybrid")
    after = embedded_share(await app.jobs.get(job.id))
    scores = hit_scores(answer["rankings"], [q["targets"] for q in asked])
    return {"at": round(at, 1), "embedded": (round(before, 3), round(after, 3)), **scores}


async def time_first_hit(app: Archivist, source_id: Any, question: str, began: float, line: Timeline) -> None:
    """Ask `question` every 0.1 s until the source answers it (from the keyword leg, at first)."""
    while line.first_hit is None:
        outcome = await app.search.search(question, source_id=source_id, match_count=5)
        if outcome.hits:
            line.first_hit = time.perf_counter() - began
            return
        await asyncio.sleep(0.1)


async def watch(
    app: Archivist, probe: Probe, started: CrawlJob, base: str, asked: list[dict[str, Any]], poll: float
) -> Timeline:
    """Poll the job until it completes, noting each moment and asking the questions at the three moments."""
    line = Timeline()
    began = time.perf_counter()
    line.samples["start"] = probe.sample()
    question = asked[0]["q"] if asked else "documentation"
    hit = asyncio.create_task(time_first_hit(app, started.source_id, question, began, line))
    try:
        return await _follow(app, probe, started.id, (base, asked, poll), began, line)
    finally:
        hit.cancel()
        await asyncio.gather(hit, return_exceptions=True)


async def _follow(
    app: Archivist,
    probe: Probe,
    job_id: Any,
    ask_with: tuple[str, list[dict[str, Any]], float],
    began: float,
    line: Timeline,
) -> Timeline:
    base, asked, poll = ask_with
    while True:
        job = await app.jobs.get(job_id)
        now = time.perf_counter() - began
        probe.sample()
        if line.searchable is None and searchable(job):
            line.searchable, line.jobs["searchable"] = now, job
            line.samples["searchable"] = probe.sample()
            if asked:
                line.quality[MOMENTS[0]] = await quality(app, job, base, asked, now)
        half = line.searchable is not None and embedded_share(job) >= 0.5  # a share of every page's chunks
        if MOMENTS[1] not in line.quality and asked and half and not job.finished:
            line.quality[MOMENTS[1]] = await quality(app, job, base, asked, now)
        if job.finished:
            line.embedded, line.jobs["embedded"] = now, job
            line.samples["embedded"] = probe.sample()
            if asked:
                line.quality[MOMENTS[2]] = await quality(app, job, base, asked, now)
            return line
        await asyncio.sleep(poll)


async def crawl_set(
    app: Archivist, probe: Probe, name: str, args: argparse.Namespace, asked: list[dict[str, Any]]
) -> dict[str, Any]:
    _, directory, start, _ = DOC_SETS[name]
    server = serve(directory, [t for q in asked for t in q["targets"]])
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(app, stop, f"bench-arrival-{name}"))
    try:
        started = await app.crawl.start(
            CrawlRequest(
                url=base + start, title=f"bench-arrival-{name}", recursive=True, max_depth=20, max_pages=args.max_pages
            )
        )
        line = await watch(app, probe, started.job, base, asked, args.poll)
    finally:
        stop.set()
        await worker
        server.shutdown()
    return summarise(probe, name, line, len(asked))


def summarise(probe: Probe, name: str, line: Timeline, questions: int) -> dict[str, Any]:
    done = line.jobs["embedded"]
    stored = line.jobs.get("searchable", done)
    t1 = line.searchable or line.embedded or 0.0
    t3 = line.embedded or 0.0
    chunks = done.chunks_embedded + done.chunks_pending
    tail = max(t3 - t1, 1e-9)
    return {
        "set": name,
        "status": done.status,
        "pages": done.pages_crawled,
        "chunks": chunks,
        "questions": questions,
        "first_keyword_hit_s": _round(line.first_hit),
        "all_keyword_searchable_s": _round(t1),
        "all_embedded_s": _round(t3),
        "phase1_pages_per_s": round(stored.pages_crawled / max(t1, 1e-9), 2),
        "phase1_chunks_per_s": round(stored.total_chunks / max(t1, 1e-9), 1),
        "phase1_chunks_embedded": stored.chunks_embedded,
        "phase2_chunks_per_s": round((chunks - stored.chunks_embedded) / tail, 1) if t3 > t1 else None,
        "overall_chunks_embedded_per_s": round(chunks / max(t3, 1e-9), 1),
        "cpu_phase1": probe.utilisation(line.samples["start"], line.samples["searchable"]),
        "cpu_phase2": probe.utilisation(line.samples["searchable"], line.samples["embedded"]),
        "quality": line.quality,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sets = available_sets([s.strip() for s in args.sets.split(",") if s.strip()])
    if not sets:
        raise SystemExit("no doc set available")
    questions = json.loads(QUESTIONS.read_text())["questions"]
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="arrival-db-", dir=CACHE_DIR))  # a fresh embedded database
    settings = bench_settings(args, data_dir)
    app = await Archivist.open(settings)
    probe = Probe(None if settings.database_url else data_dir / "pgdata")
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "max_pages": args.max_pages,
        "sets": [],
    }
    try:
        for name in sets:
            asked = [q for q in questions if q["set"] == name]
            results["sets"].append(await crawl_set(app, probe, name, args, asked))
    finally:
        await app.close()
        if not settings.database_url and not args.keep:
            await asyncio.to_thread(remove_embedded, data_dir)
    results["peak_rss_mb"] = {
        "server": round(probe.peak_server_rss / 2**20),
        "postgres": round(probe.peak_postgres_rss / 2**20),
    }
    results["machine"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return results


def report(results: dict[str, Any]) -> str:
    cores = results["machine"]["cores"]
    rss = results["peak_rss_mb"]
    lines = [
        f"max {results['max_pages']} pages per set; {cores} cores, {cpu_line(results['machine'])}; load average before "
        f"{results['machine']['load_average']}, after {results['machine']['load_average_after']}; "
        f"peak RSS: server {rss['server']} MB, PostgreSQL {rss['postgres']} MB",
        "",
        "| set | pages | chunks | first keyword hit | all keyword-searchable | all embedded | phase 1 pages/s "
        "| phase 1 chunks/s (embedded meanwhile) | phase 2 chunks/s | overall chunks/s embedded "
        "| CPU phase 1 (server + PG) | CPU phase 2 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in results["sets"]:
        c1, c2 = s["cpu_phase1"], s["cpu_phase2"]
        lines.append(
            f"| {s['set']} | {s['pages']} | {s['chunks']} | {_secs(s['first_keyword_hit_s'])} | "
            f"{_secs(s['all_keyword_searchable_s'])} | {_secs(s['all_embedded_s'])} | {s['phase1_pages_per_s']} | "
            f"{s['phase1_chunks_per_s']} ({s['phase1_chunks_embedded']}) | {s['phase2_chunks_per_s'] or '-'} | "
            f"{s['overall_chunks_embedded_per_s']} | {c1['total']:.0%} ({c1['server']:.0%} + {c1['postgres']:.0%}) | "
            f"{c2['total']:.0%} ({c2['server']:.0%} + {c2['postgres']:.0%}) |"
        )
    lines += ["", "| set | moment | at | chunks embedded while asked | hit@5 | MRR@10 |", "|---|---|---|---|---|---|"]
    for s in results["sets"]:
        for moment in MOMENTS:
            q = s["quality"].get(moment)
            if q is None:
                lines.append(
                    f"| {s['set']} ({s['questions']} q) | {moment} | (passed before it could be asked) | | | |"
                )
                continue
            share = f"{q['embedded'][0]:.0%} → {q['embedded'][1]:.0%}"
            lines.append(
                f"| {s['set']} ({s['questions']} q) | {moment} | {q['at']} s | {share} | {q['hit@5']} | {q['mrr@10']} |"
            )
    return "\n".join(lines)


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value} s"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default=",".join(ARRIVAL_SETS), help=f"comma-separated, of {', '.join(DOC_SETS)}")
    parser.add_argument("--max-pages", type=int, default=5000, help="pages crawled per set (default: all)")
    parser.add_argument("--concurrency", type=int, default=4, help="crawl_concurrency and per-host concurrency")
    parser.add_argument("--poll", type=float, default=0.25, help="seconds between job status polls")
    parser.add_argument("--keep", action="store_true", help="keep the embedded database (bench/.cache/arrival-db-*)")
    parser.add_argument("--database-url", default=None, help="default: DATABASE_URL, else a fresh embedded server")
    parser.add_argument("--out", type=Path, default=CACHE_DIR / "arrival.json")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    with use_scope(Scope.owner()):  # a benchmark runs as the local owner
        results = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(report(results))


if __name__ == "__main__":
    main()
