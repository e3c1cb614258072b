"""Identifier queries on real documentation (issue 29, point 8): names as agents type them.

    nice -n 10 .venv/bin/python bench/identifiers.py [--sets django,postgresql,mkdocs,python]
        [--max-pages 150] [--keep | --reuse-crawl] [--out bench/.cache/identifiers.json]

The same harness as bench/docs.py (each Debian doc set served on 127.0.0.1 and crawled through the real
job path, the questions' target pages first in the sitemap, at most --max-pages pages a set), with the
questions of bench/identifier_questions.json: `QuerySet.select_related`, `pg_stat_statements`,
`use_directory_urls`, `asyncio.TaskGroup`, ... each with the page that defines it. Sources are titled
`bench-ids-<set>`.

Printed: hit@1, hit@5 and MRR@10 (page level) for hybrid, keyword and vector search, beside a page-level
BM25 (rank-bm25 over the stored pages' text, lower-cased `\\w+` tokens, so `select_related` is one token).
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

from bench.common import CACHE_DIR  # noqa: E402
from bench.docs import DOC_SETS, run  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402

QUESTIONS = ROOT / "bench" / "identifier_questions.json"
STRATEGIES = ("hybrid", "keyword", "vector")


def table(results: dict[str, Any]) -> str:
    lines = ["| set | strategy | hit@1 | hit@5 | MRR@10 |", "|---|---|---|---|---|"]
    totals: dict[str, list[float]] = {}
    for name, entry in results["sets"].items():
        n = entry["questions"]
        for strategy, s in entry["strategies"].items():
            lines.append(f"| {name} ({n} q) | {strategy} | {s['hit@1']} | {s['hit@5']} | {s['mrr@10']} |")
            sums = totals.setdefault(strategy, [0.0, 0.0, 0.0, 0])
            for i, key in enumerate(("hit@1", "hit@5", "mrr@10")):
                sums[i] += s[key] * n
            sums[3] += n
    for strategy, (h1, h5, rr, n) in totals.items():
        lines.append(f"| all ({n} q) | {strategy} | {h1 / n:.3f} | {h5 / n:.3f} | {rr / n:.3f} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sets", default="django,postgresql,mkdocs,python", help=f"comma-separated, of {', '.join(DOC_SETS)}"
    )
    parser.add_argument("--max-pages", type=int, default=150, help="pages crawled per doc set")
    parser.add_argument("--strategies", default=",".join(STRATEGIES), help="search types asked, comma-separated")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--keep", action="store_true", help="keep the crawled sources (default: delete them)")
    parser.add_argument("--reuse-crawl", action="store_true", help="ask against the sources a --keep run left")
    parser.add_argument("--database-url", default=None, help="default: DATABASE_URL, else an embedded server")
    parser.add_argument("--out", type=Path, default=CACHE_DIR / "identifiers.json")
    args = parser.parse_args(argv)
    args.questions, args.prefix, args.legacy_extraction = QUESTIONS, "bench-ids", False
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    with use_scope(Scope.owner()):  # a benchmark runs as the local owner
        results = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(table(results))


if __name__ == "__main__":
    main()
