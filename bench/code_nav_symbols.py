"""Code navigation, the symbol half (issue 36): definitions, references and outlines, against an oracle
from Python's own `ast` over the same files. Sections of bench/code_nav.py (run that).

- definitions: hit@1 on path + line for qualified queries (`json.decoder.py_scanstring`,
  `Path.read_text`, `shutil.Error`) and bare names unique in the oracle, picked at random (seeded)
  among the definitions whose query names one definition only;
- references: recall and precision of the (path, line) pairs where a name is used (the oracle: Name,
  Attribute (its attribute's line), import names, arguments and keywords, global/nonlocal names;
  definition lines of the name left out), on files `ast` parses;
- latency p50/p95 of definition, references (first page) and outline calls, warm;
- the symbol tables' size beside the code's own bytes.
"""

from __future__ import annotations

import ast
import os
import random
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.code_nav import Bench
    from services.app import Archivist

SEED = 36
DEFINITIONS = 50
REFERENCES = 20


# ---------------------------------------------------------------- the oracle


class Oracle:
    def __init__(self, files: dict[str, str]) -> None:
        self.definitions: list[dict[str, Any]] = []  # qualified parts, path, line, end
        self.uses: dict[str, set[tuple[str, int]]] = defaultdict(set)
        self.parsed: set[str] = set()
        for relative, text in sorted(files.items()):
            if not relative.endswith(".py"):
                continue
            try:
                tree = ast.parse(text)
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


def postgres_cpu(data_dir: Path) -> float | None:
    """CPU seconds the embedded PostgreSQL's processes have used (None with DATABASE_URL, or off Linux):
    on a shared machine the wall time says little, the CPU spent says what the ingest costs."""
    try:
        postmaster = int((data_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid = int(stat.parent.name)
            if pid == postmaster or int(fields[1]) == postmaster:  # fields[1]: the parent's pid
                total += int(fields[11]) + int(fields[12])  # utime + stime
        return total / tick
    except (OSError, ValueError, IndexError):
        return None


async def timed(call: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = await call
    return result, (time.perf_counter() - start) * 1000


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


async def symbols_section(bench: Bench) -> list[str]:
    """Definitions, references and outlines of the synced files against `ast`, and the tables' size."""
    started = time.perf_counter()
    oracle = Oracle(bench.files)
    rng = random.Random(SEED)
    out = [
        f"symbol oracle: {len(oracle.parsed)} files `ast` parses, {len(oracle.definitions)} definitions "
        f"({time.perf_counter() - started:.0f} s)"
    ]
    app, source_id = bench.app, bench.source_id
    found = await measure_definitions(app, oracle, source_id, DEFINITIONS, rng)
    out.append(
        f"definitions: {found['queries']} queries, hit@1 {found['hit_at_1']:.3f}, p50 {found['p50_ms']} ms, "
        f"p95 {found['p95_ms']} ms; sample {found['sample'][:5]}"
    )
    out += [f"  miss: {miss}" for miss in found["misses"]]
    used = await measure_references(app, oracle, source_id, REFERENCES, rng)
    out.append(
        f"references: {len(used['names'])} names, recall {used['recall']:.4f}, precision {used['precision']:.4f}, "
        f"first page p50 {used['first_page_p50_ms']} ms, p95 {used['first_page_p95_ms']} ms"
    )
    out += [f"  imperfect: {entry}" for entry in used["imperfect"]]
    documents = [
        r["document_id"]
        for r in await app.db.pool.fetch(
            "SELECT DISTINCT f.document_id FROM git_files f JOIN code_symbol_files s ON s.document_id = f.document_id "
            "WHERE f.source_id = $1 ORDER BY 1",
            source_id,
        )
    ]
    outline = await measure_outlines(app, documents, rng)
    out.append(f"outline: {outline['files']} files, p50 {outline['p50_ms']} ms, p95 {outline['p95_ms']} ms")
    tables = ("code_symbols", "code_references", "code_qualified_references", "code_symbol_files")
    size = {t: await app.db.pool.fetchval("SELECT pg_total_relation_size($1::regclass)", t) for t in tables}
    code = sum(len(t.encode()) for t in bench.files.values())
    total = sum(size.values())
    out.append(
        f"symbol tables: {total / 1e6:.1f} MB ({', '.join(f'{t} {v / 1e6:.1f} MB' for t, v in size.items())}) "
        f"for {code / 1e6:.1f} MB of code: {total / code:.2f}x the code's bytes"
    )
    return out
