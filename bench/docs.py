"""Real-documentation benchmark: crawl Debian's doc packages on 127.0.0.1, then ask agent-style questions.

    nice -n 10 .venv/bin/python bench/docs.py [--sets django,postgresql] [--max-pages 300]
        [--legacy-extraction] [--out bench/.cache/docs.json]

Each doc set (PostgreSQL 15: DocBook, postgresql-doc-15; Django: Sphinx, python-django-doc; MkDocs'
own docs: mkdocs-doc) is served from /usr/share/doc by a small threaded HTTP server on 127.0.0.1 and
crawled from its index through the real job path (JobService.start + an in-process worker), politeness
delays off, at most --max-pages pages per set. The server's /sitemap.xml (read by the crawler's
discovery) lists the questions' target pages first, then every other page, so a bounded crawl holds
every target plus the site's other pages as distractors. Then every question of bench/docs_questions.json (written
for this benchmark; target pages named by path) is asked through SearchService within its set's source.

Printed: per strategy hit@1, hit@5, MRR@10 (page level: a hit is a target page's URL among the
distinct URLs of the results) and p50 latency (query embedding + search); a page-level BM25 baseline
(rank-bm25 over the same stored pages' extracted text); crawl pages/s and chunks/s; the share of
crawl wall time the embedder was busy; indexed characters (chunk text) / article characters (the text
of the generator's content element, taken from the HTML on disk independently of services/pages).
`--legacy-extraction` crawls with the pre-services/pages conversion (crawl4ai's whole-page markdown)
for a before/after comparison. Installs nothing: a missing doc set names its apt package.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import os
import re
import statistics
import sys
import threading
import time
from datetime import UTC, datetime
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import CACHE_DIR, machine_info  # noqa: E402
from bench.extraction import reference  # noqa: E402
from bench.metrics import first_ranks, hit_scores  # noqa: E402
from models.jobs import CrawlRequest  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist, run_worker  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from services.embeddings import create_embedder  # noqa: E402
from services.embeddings.base import Embedder  # noqa: E402

logger = logging.getLogger("bench.docs")

#: name -> (apt package, html root, start page, reference layout name for bench/extraction.py)
DOC_SETS: dict[str, tuple[str, Path, str, str]] = {
    "django": ("python-django-doc", Path("/usr/share/doc/python-django-doc/html"), "index.html", "django"),
    "postgresql": ("postgresql-doc-15", Path("/usr/share/doc/postgresql-doc-15/html"), "index.html", "postgresql"),
    "mkdocs": ("mkdocs-doc", Path("/usr/share/doc/mkdocs/html"), "index.html", "mkdocs"),
    "python": ("python3.11-doc", Path("/usr/share/doc/python3.11-doc/html"), "index.html", "python"),
}
QUESTIONS = ROOT / "bench" / "docs_questions.json"
#: Title prefix of the sources a run crawls (`<prefix>-<set>`); bench/identifiers.py uses its own.
PREFIX = "bench-docs"
STRATEGIES = ("vector", "hybrid", "rerank")
_WORD = re.compile(r"\w+")


class TimingEmbedder(Embedder):
    """Wraps the real embedder and adds up the wall time during which at least one passage embedding
    runs (the model gate runs one call per slot side by side)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.busy = 0.0
        self._running, self._since = 0, 0.0
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            if self._running == 0:
                self._since = time.perf_counter()
            self._running += 1
        try:
            return self.inner.embed_documents(texts)
        finally:
            with self._lock:
                self._running -= 1
                if self._running == 0:
                    self.busy += time.perf_counter() - self._since

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


class QuietHandler(SimpleHTTPRequestHandler):
    """Static files, plus a /sitemap.xml listing `first` pages before every other page (sorted)."""

    first: tuple[str, ...] = ()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:
        if self.path != "/sitemap.xml":
            super().do_GET()
            return
        root = Path(self.directory)
        host = f"http://{self.headers.get('Host')}/"
        others = sorted(str(p.relative_to(root)) for p in root.rglob("*.html") if "_modules" not in p.parts)
        paths = list(dict.fromkeys([*self.first, *others]))
        body = "".join(f"<url><loc>{host}{path}</loc></url>" for path in paths)
        data = f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{body}</urlset>'
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(data.encode())))
        self.end_headers()
        self.wfile.write(data.encode())


def serve(directory: Path, first: list[str]) -> ThreadingHTTPServer:
    """A threaded static server for `directory` on 127.0.0.1 (a free port); its sitemap lists `first` first."""
    handler = type("SetHandler", (QuietHandler,), {"first": tuple(first)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(directory)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name=f"serve-{directory.name}").start()
    return server


def legacy_extract_page(source: str, url: str | None = None, content_type: str = "text/html") -> Any:
    """The conversion before services/pages: crawl4ai's scraping strategy + default markdown, whole page."""
    from crawl4ai.content_scraping_strategy import LXMLWebScrapingStrategy
    from crawl4ai.markdown_generation_strategy import DefaultMarkdownGenerator

    from services.pages import ExtractedPage, extract_page
    from services.pages.links import unique_normalized

    if content_type not in {"text/html", "application/xhtml+xml"}:
        return extract_page(source, url, content_type)
    scraped = LXMLWebScrapingStrategy().scrap(url, source)
    markdown = DefaultMarkdownGenerator(options={"single_line_break": False}).generate_markdown(
        input_html=scraped.cleaned_html, base_url=url, citations=False
    )
    hrefs = [link.href for link in [*scraped.links.internal, *scraped.links.external] if link.href]
    title = (scraped.metadata or {}).get("title")
    return ExtractedPage(title, (markdown.raw_markdown or "").strip(), unique_normalized(hrefs, url or ""), {})


def bench_settings(args: argparse.Namespace) -> Settings:
    return Settings(
        _env_file=None,
        database_url=args.database_url or os.environ.get("DATABASE_URL"),
        data_dir=CACHE_DIR / "docs-db",
        crawl_allow_private=True,
        crawl_max_pages=max(args.max_pages, 1),
        crawl_delay_seconds=0,
        crawl_concurrency=args.concurrency,
        crawl_per_host_concurrency=args.concurrency,
        job_poll_seconds=0.1,
        run_worker=False,
    )


async def drop_leftovers(app: Archivist, prefix: str = PREFIX) -> None:
    """Delete the sources (with their jobs, pages and chunks) an interrupted earlier run left behind."""
    rows = await app.db.pool.fetch("SELECT id FROM sources WHERE title LIKE $1", f"{prefix}-%")
    for row in rows:
        await app.db.pool.execute("DELETE FROM sources WHERE id = $1", row["id"])


async def reused_crawl(app: Archivist, name: str, prefix: str = PREFIX) -> tuple[dict[str, Any], str] | None:
    """A crawl kept by an earlier `--keep` run of this set (its stats, and the base URL it was served at)."""
    row = await app.db.pool.fetchrow(
        "SELECT s.id, min(d.url) AS url, count(*) AS pages FROM sources s JOIN documents d ON d.source_id = s.id "
        "WHERE s.title = $1 GROUP BY s.id",
        f"{prefix}-{name}",
    )
    if row is None:
        return None
    match = re.match(r"https?://[^/]+/", row["url"] or "")
    if match is None:
        return None
    chunks = await app.db.pool.fetchval("SELECT count(*) FROM chunks WHERE source_id = $1", row["id"])
    return {"source_id": row["id"], "status": "reused", "pages": row["pages"], "chunks": chunks}, match.group(0)


async def crawl_set(
    app: Archivist, timing: TimingEmbedder, name: str, url: str, max_pages: int, prefix: str = PREFIX
) -> dict[str, Any]:
    """Crawl one doc set through the job path; wall time, pages, chunks and embedder busy time."""
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(app, stop, f"{prefix}-{name}"))
    busy_before = timing.busy
    began = time.perf_counter()
    started = await app.crawl.start(
        CrawlRequest(url=url, title=f"{prefix}-{name}", recursive=True, max_depth=10, max_pages=max_pages)
    )
    try:
        job = await app.jobs.wait(started.job.id, timeout=3600, interval=0.2)
    finally:
        elapsed = time.perf_counter() - began
        stop.set()
        await worker
    return {
        "source_id": job.source_id,
        "status": job.status,
        "pages": job.pages_crawled,
        "failed": job.pages_failed,
        "chunks": job.chunks_embedded,
        "seconds": round(elapsed, 1),
        "pages_per_second": round(job.pages_crawled / elapsed, 2),
        "chunks_per_second": round(job.chunks_embedded / elapsed, 1),
        "embedder_busy": round((timing.busy - busy_before) / elapsed, 3),
    }


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def page_path(url: str | None, base: str) -> str | None:
    if not url or not url.startswith(base):
        return None
    path = url[len(base) :].split("?")[0]
    return path or "index.html"


async def stored_pages(app: Archivist, source_id: Any, base: str) -> tuple[dict[str, str], int]:
    """path -> extracted text of every stored page, and the total indexed (chunk) characters."""
    rows = await app.db.pool.fetch("SELECT url, content FROM documents WHERE source_id = $1", source_id)
    indexed = await app.db.pool.fetchval(
        "SELECT coalesce(sum(length(text)), 0) FROM chunks WHERE source_id = $1", source_id
    )
    pages = {p: r["content"] for r in rows if (p := page_path(r["url"], base))}
    return pages, int(indexed)


def article_chars(directory: Path, paths: list[str], layout: str) -> int:
    """Characters of the article text of the stored pages, from the HTML on disk."""
    total = 0
    for path in paths:
        file = directory / path
        if file.is_file():
            ref = reference(file.read_text(encoding="utf-8", errors="replace"), layout)
            total += len(ref[0]) if ref else 0
    return total


def bm25_rankings(pages: dict[str, str], questions: list[str]) -> list[list[str]]:
    from rank_bm25 import BM25Okapi

    paths = list(pages)
    bm25 = BM25Okapi([words(pages[p]) for p in paths])
    rankings = []
    for question in questions:
        scores = bm25.get_scores(words(question))
        rankings.append([paths[i] for i in np.argsort(-scores)[:10]])
    return rankings


def reply_size(outcome: Any, question: str, strategy: str) -> tuple[int, int]:
    """(characters of the tool's JSON reply at defaults, characters of passage text in it): what an agent
    reads for this search through search_knowledge_base (issue 29, point 7)."""
    from tools.common import to_json
    from tools.search_knowledge_base import search_payload

    payload = {"success": True, **search_payload(outcome, question, strategy, 10)}
    return len(to_json(payload)), sum(len(r["text"]) for r in payload["results"])


async def ask(app: Archivist, source_id: Any, base: str, questions: list[str], strategy: str) -> dict[str, Any]:
    await app.search.search(questions[0], source_id=source_id, match_count=10, search_type=strategy)  # warm up
    rankings, latencies, replies, texts = [], [], [], []
    for question in questions:
        began = time.perf_counter()
        outcome = await app.search.search(question, source_id=source_id, match_count=10, search_type=strategy)
        latencies.append(1000 * (time.perf_counter() - began))
        paths = [page_path(hit.url, base) for hit in outcome.hits]
        rankings.append([p for p in dict.fromkeys(paths) if p])
        reply, text = reply_size(outcome, question, strategy)
        replies.append(reply)
        texts.append(text)
    return {
        "rankings": rankings,
        "p50_ms": round(statistics.median(latencies), 1),
        "reply_chars": round(statistics.mean(replies)),
        "passage_share": round(sum(texts) / max(1, sum(replies)), 3),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = bench_settings(args)
    questions = json.loads(Path(getattr(args, "questions", QUESTIONS)).read_text())["questions"]
    prefix = getattr(args, "prefix", PREFIX)
    wanted = [s.strip() for s in args.sets.split(",") if s.strip()]
    available = []
    for name in wanted:
        package, directory, _, _ = DOC_SETS[name]
        if not (directory / "index.html").is_file():
            print(f"{name}: {directory} is missing; install it with: apt-get install {package}", file=sys.stderr)
        else:
            available.append(name)
    if len(available) < len(wanted) and not available:
        raise SystemExit("no doc set available")
    if args.legacy_extraction:
        import services.fetchers.crawl4ai_http as http_fetcher

        http_fetcher.extract_page = legacy_extract_page  # type: ignore[assignment]
    timing = TimingEmbedder(await asyncio.to_thread(create_embedder, settings))
    app = await Archivist.open(settings, timing)
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "extraction": "legacy (crawl4ai whole page)" if args.legacy_extraction else "services.pages",
        "max_pages": args.max_pages,
        "sets": {},
    }
    try:
        if not args.reuse_crawl:
            await drop_leftovers(app, prefix)
        for name in available:
            _, directory, start, layout = DOC_SETS[name]
            asked = [q for q in questions if q["set"] == name]
            server = serve(directory, [t for q in asked for t in q["targets"]])
            base = f"http://127.0.0.1:{server.server_address[1]}/"
            try:
                kept = await reused_crawl(app, name, prefix) if args.reuse_crawl else None
                if kept is not None:
                    crawl, base = kept
                else:
                    crawl = await crawl_set(app, timing, name, base + start, args.max_pages, prefix)
                pages, indexed = await stored_pages(app, crawl["source_id"], base)
                texts = [q["q"] for q in asked]
                targets = [q["targets"] for q in asked]
                entry: dict[str, Any] = {k: v for k, v in crawl.items() if k != "source_id"}
                entry["questions"] = len(asked)
                entry["targets_crawled"] = round(
                    sum(any(t in pages for t in q["targets"]) for q in asked) / max(1, len(asked)), 3
                )
                article = article_chars(directory, list(pages), layout)
                entry["indexed_chars"], entry["article_chars"] = indexed, article
                entry["indexed_over_article"] = round(indexed / max(1, article), 2)
                entry["extracted_over_article"] = round(sum(map(len, pages.values())) / max(1, article), 2)
                entry["strategies"] = {}
                if asked:
                    for strategy in args.strategies.split(","):
                        answer = await ask(app, crawl["source_id"], base, texts, strategy)
                        entry["strategies"][strategy] = {
                            **hit_scores(answer["rankings"], targets),
                            "p50_ms": answer["p50_ms"],
                            "reply_chars": answer["reply_chars"],
                            "passage_share": answer["passage_share"],
                            "ranks": first_ranks(answer["rankings"], targets),
                        }
                    bm25 = bm25_rankings(pages, texts)
                    entry["strategies"]["bm25 (page level)"] = {
                        **hit_scores(bm25, targets),
                        "ranks": first_ranks(bm25, targets),
                    }
                results["sets"][name] = entry
                if not (args.keep or args.reuse_crawl):
                    await app.sources.delete(crawl["source_id"])
            finally:
                server.shutdown()
    finally:
        await app.close()
    return results


def report(results: dict[str, Any]) -> str:
    lines = [f"extraction: {results['extraction']}, max {results['max_pages']} pages per set"]
    lines += [
        "",
        "| set | pages | pages/s | chunks/s | embedder busy | indexed ÷ article chars | extracted ÷ article |",
    ]
    lines.append("|---|---|---|---|---|---|---|")
    for name, e in results["sets"].items():
        if e["status"] == "reused":
            lines.append(f"| {name} | {e['pages']} (reused crawl) | | | | {e['indexed_over_article']} | |")
            continue
        lines.append(
            f"| {name} | {e['pages']} | {e['pages_per_second']} | {e['chunks_per_second']} | "
            f"{e['embedder_busy']:.0%} | {e['indexed_over_article']} | {e['extracted_over_article']} |"
        )
    lines += [
        "",
        "| set | strategy | hit@1 | hit@5 | MRR@10 | p50 ms | reply chars | passage share |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, e in results["sets"].items():
        for strategy, s in e["strategies"].items():
            p50, chars, share = s.get("p50_ms", ""), s.get("reply_chars", ""), s.get("passage_share", "")
            lines.append(
                f"| {name} ({e['questions']} q) | {strategy} | {s['hit@1']} | {s['hit@5']} | {s['mrr@10']} | {p50} "
                f"| {chars} | {share} |"
            )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="django,postgresql,mkdocs", help=f"comma-separated, of {', '.join(DOC_SETS)}")
    parser.add_argument("--max-pages", type=int, default=150, help="pages crawled per doc set")
    parser.add_argument("--strategies", default=",".join(STRATEGIES), help="search types asked, comma-separated")
    parser.add_argument("--concurrency", type=int, default=4, help="crawl_concurrency and per-host concurrency")
    parser.add_argument("--legacy-extraction", action="store_true", help="crawl with the pre-services/pages conversion")
    parser.add_argument("--keep", action="store_true", help="keep the crawled sources (default: delete them)")
    parser.add_argument(
        "--reuse-crawl",
        action="store_true",
        help="ask the questions against the sources a --keep run left (no crawl; for search-side changes)",
    )
    parser.add_argument("--database-url", default=None, help="default: DATABASE_URL, else an embedded server")
    parser.add_argument("--out", type=Path, default=CACHE_DIR / "docs.json")
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
