"""A profile's source order as a tie-break and a small boost (services/search: by_source_order): does it
hurt? bench/docs.py's questions, asked across two doc sets at once instead of within their own set.

    nice -n 10 .venv/bin/python bench/source_order.py [--max-pages 150] [--strategies hybrid,vector,keyword]

Django and PostgreSQL 15 docs are crawled as in bench/docs.py (kept in bench/.cache/docs-db as
`bench-docs-<set>`, reused by later runs), then every question is searched over both sources three
ways: no order (a plain `source_ids` search), the question's own set first, the other set first (the
worst case: a profile that prefers the wrong source). Printed per strategy: hit@1, hit@5, MRR@10 over
every question (a hit: a target page's URL among the distinct result URLs, which now include the
other set's pages) and how many result lists the order changed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import machine_info  # noqa: E402
from bench.docs import DOC_SETS, QUESTIONS, TimingEmbedder, bench_settings, crawl_set, reused_crawl, serve  # noqa: E402
from bench.metrics import hit_scores  # noqa: E402
from services.app import Archivist  # noqa: E402
from services.embeddings import create_embedder  # noqa: E402
from services.search import SOURCE_ORDER_BOOST  # noqa: E402

SETS = ("django", "postgresql")


async def source_of(app: Archivist, timing: TimingEmbedder, name: str, max_pages: int, targets: list[str]) -> tuple:
    kept = await reused_crawl(app, name)
    if kept is not None:
        return kept[0]["source_id"], kept[1]
    _, directory, start, _ = DOC_SETS[name]
    server = serve(directory, targets)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        crawl = await crawl_set(app, timing, name, base + start, max_pages)
    finally:
        server.shutdown()
    print(f"{name}: crawled {crawl['pages']} pages in {crawl['seconds']} s", file=sys.stderr)
    return crawl["source_id"], base


async def ranking(app: Archivist, question: str, strategy: str, sources: list[Any], order: list[Any] | None) -> list:
    outcome = await app.search.search(
        question, match_count=10, search_type=strategy, source_ids=sources, source_order=order
    )
    return list(dict.fromkeys(hit.url for hit in outcome.hits if hit.url))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = bench_settings(
        argparse.Namespace(database_url=args.database_url, max_pages=args.max_pages, concurrency=4)
    )
    questions = [q for q in json.loads(QUESTIONS.read_text())["questions"] if q["set"] in SETS]
    timing = TimingEmbedder(await asyncio.to_thread(create_embedder, settings))
    app = await Archivist.open(settings, timing)
    results: dict[str, Any] = {"machine": machine_info(), "boost": SOURCE_ORDER_BOOST, "questions": len(questions)}
    try:
        found = {}
        for name in SETS:
            wanted = [t for q in questions if q["set"] == name for t in q["targets"]]
            found[name] = await source_of(app, timing, name, args.max_pages, wanted)
        sources = [found[name][0] for name in SETS]
        targets = [[found[q["set"]][1] + t for t in q["targets"]] for q in questions]
        for strategy in args.strategies.split(","):
            lists: dict[str, list[list[str]]] = {"none": [], "own first": [], "other first": []}
            for q in questions:
                own = found[q["set"]][0]
                other = next(s for s in sources if s != own)
                lists["none"].append(await ranking(app, q["q"], strategy, sources, None))
                lists["own first"].append(await ranking(app, q["q"], strategy, sources, [own, other]))
                lists["other first"].append(await ranking(app, q["q"], strategy, sources, [other, own]))
            results[strategy] = {
                variant: {
                    **hit_scores(rankings, targets),
                    "lists_changed": sum(a != b for a, b in zip(rankings, lists["none"], strict=True)),
                }
                for variant, rankings in lists.items()
            }
    finally:
        await app.close()
    return results


def report(results: dict[str, Any]) -> str:
    lines = [
        f"{results['questions']} questions over django + postgresql at once; boost {results['boost']}",
        "| strategy | source order | hit@1 | hit@5 | MRR@10 | result lists changed |",
        "|---|---|---|---|---|---|",
    ]
    for strategy, variants in results.items():
        if not isinstance(variants, dict) or "none" not in variants:
            continue
        for variant, m in variants.items():
            scores = f"{m['hit@1']:.3f} | {m['hit@5']:.3f} | {m['mrr@10']:.3f}"
            lines.append(f"| {strategy} | {variant} | {scores} | {m['lists_changed']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-pages", type=int, default=150)
    parser.add_argument("--strategies", default="hybrid,vector,keyword")
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / ".cache" / "source_order.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    results = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(report(results))


if __name__ == "__main__":
    main()
