"""Code navigation, the symbol half (issue 36): definitions, references and outlines over the Python
standard library, against an oracle from Python's own `ast` over the same files.

    nice -n 10 .venv/bin/python bench/code_nav_symbols.py [--definitions 50] [--references 20] [--top-level]

Syncs the interpreter's Lib/ (`sysconfig.get_paths()["stdlib"]`, its *.py files, site-packages left
out) as a folder source through the real sync service (parse, chunk, symbol table, store; embeddings by
a stand-in that costs nothing, since no search here uses them), then asks the symbol table through
`SymbolSearch` (what the tools call) and compares with the oracle:
- definitions: hit@1 on path + line for qualified queries (`json.decoder.py_scanstring`,
  `Path.read_text`, `shutil.Error`) and bare names unique in the oracle, picked at random (seeded)
  among the definitions whose query names one definition only;
- references: recall and precision of the (path, line) pairs where a name is used (the oracle: Name,
  Attribute (its attribute's line), import names, arguments and keywords, global/nonlocal names;
  definition lines of the name left out), on files `ast` parses;
- latency p50/p95 of definition, references (first page) and outline calls, warm;
- the symbol table's size beside the code's own bytes, and the sync's wall time.
The database is DATABASE_URL when set, else an embedded PostgreSQL under bench/.cache/code-symbols-db.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import random
import statistics
import sys
import sysconfig
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import CACHE_DIR, machine_info  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist, run_worker  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from services.embeddings.base import Embedder  # noqa: E402

EXCLUDE = ["site-packages/**", "**/__pycache__/**", "idlelib/**", "lib2to3/tests/data/**"]


class FreeEmbedder(Embedder):
    """A stand-in: unit vectors at no cost (no search here reads them)."""

    name = "bench-free"
    dim = 8

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, 0] = 1.0
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


# ---------------------------------------------------------------- the oracle


class Oracle:
    def __init__(self, root: Path, recursive: bool = True) -> None:
        self.definitions: list[dict[str, Any]] = []  # qualified parts, path, line, end
        self.uses: dict[str, set[tuple[str, int]]] = defaultdict(set)
        self.parsed: set[str] = set()
        for file in sorted(root.rglob("*.py") if recursive else root.glob("*.py")):
            relative = file.relative_to(root).as_posix()
            if relative.startswith(("site-packages/", "idlelib/", "lib2to3/tests/data/")) or "__pycache__" in relative:
                continue
            try:
                tree = ast.parse(file.read_bytes())
            except (SyntaxError, ValueError):
                continue
            self.parsed.add(relative)
            module = relative.removesuffix(".py").removesuffix("/__init__").split("/")
            self._walk(tree, [p for p in module if p.isidentifier()], relative)

    def _walk(self, tree: ast.AST, module: list[str], path: str) -> None:
        defined_lines: set[tuple[str, int]] = set()

        def visit(node: ast.AST, scope: list[str]) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    parts = [*scope, child.name]
                    kind = "class" if isinstance(child, ast.ClassDef) else "function"
                    self.definitions.append(
                        {"parts": parts, "path": path, "line": child.lineno, "end": child.end_lineno, "kind": kind}
                    )
                    defined_lines.add((child.name, child.lineno))
                    visit(child, parts)
                else:
                    visit(child, scope)

        visit(tree, module)
        for node in ast.walk(tree):
            for name, line in _used(node):
                if (name, line) not in defined_lines:
                    self.uses[name].add((path, line))


def _used(node: ast.AST) -> list[tuple[str, int]]:
    """The identifiers a node writes, with their lines."""
    if isinstance(node, ast.Name):
        return [(node.id, node.lineno)]
    if isinstance(node, ast.Attribute):
        return [(node.attr, node.end_lineno or node.lineno)]
    if isinstance(node, ast.alias):
        names = node.name.split(".") + ([node.asname] if node.asname else [])
        return [(n, node.lineno) for n in names if n != "*"]
    if isinstance(node, ast.ImportFrom) and node.module:
        return [(n, node.lineno) for n in node.module.split(".")]
    if isinstance(node, ast.arg):
        return [(node.arg, node.lineno)]
    if isinstance(node, ast.keyword) and node.arg:
        return [(node.arg, node.lineno)]
    if isinstance(node, ast.Global | ast.Nonlocal):
        return [(n, node.lineno) for n in node.names]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [(node.name, node.lineno)]
    return []


def suffix_count(oracle: Oracle, parts: list[str]) -> int:
    return sum(1 for d in oracle.definitions if d["parts"][-len(parts) :] == parts)


def pick_definitions(oracle: Oracle, count: int, rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    """(query, expected definition): module-qualified functions and classes, Class.method, bare names;
    each query names one definition of the oracle only."""
    public = [
        d
        for d in oracle.definitions
        if not any(p.startswith("_") for p in d["parts"]) and not d["path"].startswith("test/")
    ]
    rng.shuffle(public)
    picked: list[tuple[str, dict[str, Any]]] = []
    forms = ["module", "method", "bare", "module", "method"]
    for d in public:
        if len(picked) >= count:
            break
        form = forms[len(picked) % len(forms)]
        depth = len(d["parts"]) - len(d["path"].removesuffix(".py").removesuffix("/__init__").split("/"))
        if form == "module" and depth == 1:
            parts = d["parts"]
        elif form == "method" and depth == 2:
            parts = d["parts"][-2:]
        elif form == "bare":
            parts = d["parts"][-1:]
        else:
            continue
        if suffix_count(oracle, parts) == 1:
            picked.append((".".join(parts), d))
    return picked


def pick_references(oracle: Oracle, count: int, rng: random.Random) -> list[str]:
    names = sorted(
        {
            d["parts"][-1]
            for d in oracle.definitions
            if not d["parts"][-1].startswith("_") and 5 <= len(oracle.uses.get(d["parts"][-1], ())) <= 300
        }
    )
    return rng.sample(names, count)


# ---------------------------------------------------------------- the run


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def timed(call: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = await call
    return result, (time.perf_counter() - start) * 1000


async def sync_stdlib(app: Archivist, root: Path, recursive: bool) -> tuple[Any, float]:
    config, _ = await app.sync.bind(
        str(root), title="python-stdlib", include_patterns=["*.py"], exclude_patterns=EXCLUDE, recursive=recursive
    )
    start = time.perf_counter()
    started = await app.sync.queue(config.source_id)
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(app, stop, "bench-code-symbols"))
    try:
        job = await app.jobs.wait(started.job.id, 7200, interval=0.2)
    finally:
        stop.set()
        await worker
    assert job.status == "completed", job
    return config.source_id, time.perf_counter() - start


async def sizes(app: Archivist) -> dict[str, int]:
    tables = ("code_symbols", "code_references", "code_symbol_files")
    out = {t: await app.db.pool.fetchval("SELECT pg_total_relation_size($1::regclass)", t) for t in tables}
    out["rows_code_symbols"] = await app.db.pool.fetchval("SELECT count(*) FROM code_symbols")
    out["rows_code_references"] = await app.db.pool.fetchval("SELECT count(*) FROM code_references")
    return out


async def main(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(sysconfig.get_paths()["stdlib"])
    rng = random.Random(args.seed)
    recursive = not args.top_level
    oracle = Oracle(root, recursive)
    settings = Settings(
        _env_file=None,
        database_url=args.database_url or os.environ.get("DATABASE_URL"),
        data_dir=CACHE_DIR / "code-symbols-db",
        allowed_paths=[root],
        job_poll_seconds=0.05,
        run_worker=False,
    )
    app = await Archivist.open(settings, FreeEmbedder())
    result: dict[str, Any] = {"machine": machine_info(), "stdlib": str(root), "top_level_only": not recursive}
    try:
        with use_scope(Scope.owner()):
            source_id, seconds = await sync_stdlib(app, root, recursive)
            files = await app.db.pool.fetch(
                "SELECT f.path, f.document_id, length(d.content) AS chars FROM folder_files f "
                "JOIN documents d ON d.id = f.document_id WHERE f.source_id = $1",
                source_id,
            )
            code_bytes = sum(len((root / r["path"]).read_bytes()) for r in files)
            lines = sum((root / r["path"]).read_bytes().count(b"\n") for r in files)
            result["sync"] = {
                "files": len(files),
                "lines": lines,
                "code_bytes": code_bytes,
                "seconds": round(seconds, 1),
            }
            result["sizes"] = await sizes(app)
            symbol_bytes = sum(v for k, v in result["sizes"].items() if not k.startswith("rows_"))
            result["sizes"]["ratio_to_code"] = round(symbol_bytes / code_bytes, 3)
            result["definitions"] = await measure_definitions(app, oracle, source_id, args.definitions, rng)
            result["references"] = await measure_references(app, oracle, source_id, args.references, rng)
            result["outline"] = await measure_outlines(app, [r["document_id"] for r in files], rng)
    finally:
        await app.close()
    return result


async def measure_definitions(
    app: Archivist, oracle: Oracle, source_id: Any, count: int, rng: random.Random
) -> dict[str, Any]:
    queries = pick_definitions(oracle, count, rng)
    for query, _ in queries:  # warm
        await app.symbols.definitions(query, [source_id], 0, 20)
    hits, latencies, misses = 0, [], []
    for query, expected in queries:
        page, ms = await timed(app.symbols.definitions(query, [source_id], 0, 20))
        latencies.append(ms)
        top = page.hits[0] if page.hits else None
        if top is not None and (top.path, top.line_start) == (expected["path"], expected["line"]):
            hits += 1
        else:
            got = (top.path, top.line_start, top.qualified_name) if top else None
            misses.append({"query": query, "expected": [expected["path"], expected["line"]], "got": got})
    return {
        "queries": len(queries),
        "hit_at_1": round(hits / len(queries), 3),
        "p50_ms": round(statistics.median(latencies), 1),
        "p95_ms": round(percentile(latencies, 0.95), 1),
        "misses": misses[:10],
        "sample": [q for q, _ in queries[:10]],
    }


async def measure_references(
    app: Archivist, oracle: Oracle, source_id: Any, count: int, rng: random.Random
) -> dict[str, Any]:
    names = pick_references(oracle, count, rng)
    recalls, precisions, latencies = [], [], []
    worst: list[dict[str, Any]] = []
    for name in names:
        await app.symbols.references(name, [source_id], 0, 20)  # warm
        _, ms = await timed(app.symbols.references(name, [source_id], 0, 20))
        latencies.append(ms)
        page = await app.symbols.references(name, [source_id], 0, 100_000)
        got = {(h.path, h.line) for h in page.hits if h.path in oracle.parsed}
        want = oracle.uses[name]
        recall = len(got & want) / len(want) if want else 1.0
        precision = len(got & want) / len(got) if got else 1.0
        recalls.append(recall)
        precisions.append(precision)
        if recall < 1 or precision < 1:
            worst.append(
                {
                    "name": name,
                    "recall": round(recall, 3),
                    "precision": round(precision, 3),
                    "missed": sorted(want - got)[:3],
                    "extra": sorted(got - want)[:3],
                }
            )
    return {
        "names": names,
        "recall": round(statistics.mean(recalls), 4),
        "precision": round(statistics.mean(precisions), 4),
        "first_page_p50_ms": round(statistics.median(latencies), 1),
        "first_page_p95_ms": round(percentile(latencies, 0.95), 1),
        "imperfect": worst[:10],
    }


async def measure_outlines(app: Archivist, documents: list[Any], rng: random.Random) -> dict[str, Any]:
    chosen = rng.sample(documents, min(50, len(documents)))
    for document_id in chosen:
        await app.symbols.outline(document_id)
    latencies = [(await timed(app.symbols.outline(d)))[1] for d in chosen]
    return {
        "files": len(chosen),
        "p50_ms": round(statistics.median(latencies), 1),
        "p95_ms": round(percentile(latencies, 0.95), 1),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--definitions", type=int, default=50)
    parser.add_argument("--references", type=int, default=20)
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--top-level", action="store_true", help="only Lib/*.py (168 files, 132k lines)")
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=1, default=str))
