"""grep page one, A/B on the source a `bench/code_nav.py --keep` run left: what moves its latency.

    nice -n 10 .venv/bin/python bench/code_nav_ab.py [--subset] [--rounds 5] [--variants as_is,no_like]

Variants, interleaved round by round on the same kept source (so load drifts hit both alike):
- `as_is`: grep as the tool runs it;
- `no_like`: without the literal pre-check of each candidate batch (services/code/grep.py `literals_sql`);
- `baseline`: the grep module at `--baseline` (another checkout's services/code/grep.py), as it is.

Each round times page one of the 20 indexed patterns of bench/code_nav.py (`grep` + `fill`) for each
variant and notes what else the database was doing meanwhile (`--watch`: other backends active,
autovacuum workers). Per variant it prints the median of the per-pattern medians and the p95 of every
call, with the CPU seconds of this process and of PostgreSQL over its calls.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.code_nav import PATTERNS, TITLE, Bench, grep_page, postgres_cpu  # noqa: E402
from bench.code_nav_symbols import percentile  # noqa: E402
from bench.common import CACHE_DIR  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist  # noqa: E402
from services.code import grep as grep_module  # noqa: E402
from services.core.settings import Settings  # noqa: E402

ACTIVE_SQL = (
    "SELECT backend_type, left(query, 60) AS query FROM pg_stat_activity "
    "WHERE pid <> pg_backend_pid() AND state IS DISTINCT FROM 'idle' AND backend_type IN ('client backend', "
    "'autovacuum worker')"
)
PLAIN_LITERALS = grep_module.literals_sql


def no_literals(filter_: Any) -> tuple[str, list[str]]:
    return "", []


VARIANTS = {"as_is": PLAIN_LITERALS, "no_like": no_literals, "baseline": PLAIN_LITERALS}


def baseline_search(path: str, app: Archivist) -> Any:
    """CodeSearch from another checkout's grep.py (its own module: our services for everything else)."""
    spec = importlib.util.spec_from_file_location("baseline_grep", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_grep"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.CodeSearch(app.db)


async def background(app: Archivist) -> list[str]:
    return [f"{r['backend_type']}: {r['query']}" for r in await app.db.pool.fetch(ACTIVE_SQL)]


async def main(args: argparse.Namespace) -> None:
    settings = Settings(
        _env_file=None,
        data_dir=CACHE_DIR / ("code-nav-subset-db" if args.subset else "code-nav-db"),
        run_worker=False,
    )
    app = await Archivist.open(settings)
    try:
        with use_scope(Scope.owner("bench")):
            source_id = await app.db.pool.fetchval("SELECT id FROM sources WHERE title LIKE $1", f"{TITLE}-%")
            if source_id is None:
                raise SystemExit("no kept source: run bench/code_nav.py --keep first")
            bench = Bench(app, source_id, {}, Path("."))
            variants = args.variants.split(",")
            times: dict[str, dict[str, list[float]]] = {v: {p: [] for p, *_ in PATTERNS} for v in variants}
            cpu = dict.fromkeys(variants, 0.0)
            pg = dict.fromkeys(variants, 0.0)
            seen: set[str] = set()
            ours, other = app.code, baseline_search(args.baseline, app) if "baseline" in variants else None
            for round_ in range(args.rounds):
                for variant in variants if round_ % 2 == 0 else reversed(variants):
                    grep_module.literals_sql = VARIANTS[variant]
                    app.code = other if variant == "baseline" else ours
                    c0, p0 = time.process_time(), postgres_cpu(settings.data_dir) or 0.0
                    for pattern, flags, *_ in PATTERNS:
                        times[variant][pattern].append((await grep_page(bench, pattern, flags))[0])
                    cpu[variant] += time.process_time() - c0
                    pg[variant] += (postgres_cpu(settings.data_dir) or 0.0) - p0
                    seen.update(await background(app))
                grep_module.literals_sql = PLAIN_LITERALS
                app.code = ours
            print(f"load average {os.getloadavg()[0]:.1f}; other work seen: {sorted(seen) or 'none'}")
            for variant in variants:
                medians = [statistics.median(t) for t in times[variant].values()]
                every = [x for t in times[variant].values() for x in t]
                print(
                    f"{variant}: median of per-pattern p50 {statistics.median(medians):.1f} ms, worst p50 "
                    f"{max(medians):.1f} ms, p95 of all calls {percentile(every, 0.95):.1f} ms; CPU "
                    f"{cpu[variant]:.2f} s here, {pg[variant]:.2f} s PostgreSQL ({len(every)} calls)"
                )
            if args.per_pattern:
                for pattern in times[variants[0]]:
                    cells = " ".join(f"{v}={statistics.median(times[v][pattern]):.1f}" for v in variants)
                    print(f"  {pattern}: {cells}")
    finally:
        await app.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subset", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--variants", default="as_is,no_like")
    parser.add_argument("--per-pattern", action="store_true")
    parser.add_argument("--baseline", default="/work/main/services/code/grep.py", help="grep.py of the baseline")
    asyncio.run(main(parser.parse_args()))
