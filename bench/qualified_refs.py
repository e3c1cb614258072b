"""Qualified references (issue 36): recall and precision of `search_type="references"` for qualified
names over the Python standard library, against an oracle from Python's `ast` over the same files.

    nice -n 10 .venv/bin/python bench/qualified_refs.py [--top-level] [--out bench/.cache/qualified_refs.json]

Syncs Lib/ as bench/code_nav_symbols.py does (same embedded database, a stand-in embedder), then asks
`SymbolSearch.references` (what the tool calls) for common qualified names and compares the (path, line)
pairs with the oracle. The oracle's rule is the one services/code/qualified.py states: a use of `name`
counts when its qualifier, resolved through the file's imports (`import a.b as c`, `from a import b as
c`; relative imports by their module without dots), ends with the query's qualifier; a bare use of a
name the file defines at its top level is qualified by the file's module. Files `ast` cannot parse are
left out of both sides. Printed: per query and overall recall / precision, and p50 latency.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import statistics
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.code_nav_symbols import FreeEmbedder, sync_stdlib  # noqa: E402
from bench.common import CACHE_DIR, machine_info  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist  # noqa: E402
from services.core.settings import Settings  # noqa: E402

QUERIES = [
    "os.path.join", "os.path.exists", "os.getcwd", "os.fspath", "sys.exit", "sys.platform", "re.compile",
    "shutil.copytree", "shutil.rmtree", "functools.partial", "functools.wraps", "collections.namedtuple",
    "io.StringIO", "time.monotonic", "warnings.warn", "os.environ", "os.path", "types.MappingProxyType",
    "itertools.chain", "codecs.lookup",
]  # fmt: skip


def _chain(node: ast.AST) -> list[str] | None:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        head = _chain(node.value)
        return head + [node.attr] if head is not None else None
    return None


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements at module level, inside if/try/with/for/while blocks too (not inside defs)."""
    out: list[ast.stmt] = []
    for node in body:
        out.append(node)
        for field in ("body", "orelse", "finalbody"):
            out += _module_level(getattr(node, field, []) or [])
        for handler in getattr(node, "handlers", []) or []:
            out += _module_level(handler.body)
    return out


def file_uses(text: str) -> dict[tuple[str, str], set[int]]:
    """(name, resolved qualifier) -> lines; "." for the file's own module."""
    tree = ast.parse(text)
    own, constant_lines = set(), set()
    for node in _module_level(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                letters = [c for c in getattr(target, "id", "") if c.isalpha()]
                if isinstance(target, ast.Name) and letters and target.id.upper() == target.id:
                    own.add(target.id)
                    constant_lines.add((target.id, target.lineno))
    bound: dict[str, str] = {}
    found: dict[tuple[str, str], set[int]] = {}

    def add(name: str, qualifier: str, line: int) -> None:
        if qualifier:
            found.setdefault((name, qualifier), set()).add(line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                bound[alias.asname or parts[0]] = alias.name if alias.asname else parts[0]
                for i in range(1, len(parts)):
                    add(parts[i], ".".join(parts[:i]), node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            for i in range(1, len(parts)):
                add(parts[i], ".".join(parts[:i]), node.lineno)
            for alias in node.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                    add(alias.name, node.module, node.lineno)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain = _chain(node.value)
            if chain:
                add(node.attr, ".".join([bound.get(chain[0], chain[0]), *chain[1:]]), node.end_lineno or node.lineno)
        elif isinstance(node, ast.Name):
            target = bound.get(node.id)
            if target is not None and "." in target:
                qualifier, original = target.rsplit(".", 1)
                add(original, qualifier, node.lineno)
            elif target is None and node.id in own and (node.id, node.lineno) not in constant_lines:
                add(node.id, ".", node.lineno)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            for name in node.names:
                if name in own and name not in bound:
                    add(name, ".", node.lineno)
    return found


def module_of(path: str) -> str:
    parts = list(Path(path).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(p for p in parts if p.isidentifier())


def expected(uses: dict[str, dict[tuple[str, str], set[int]]], query: str) -> set[tuple[str, int]]:
    *qualifiers, name = query.split(".")
    out = set()
    for path, found in uses.items():
        for (used, qualifier), lines in found.items():
            held = (module_of(path) if qualifier == "." else qualifier).split(".")
            if used == name and len(held) >= len(qualifiers) and held[len(held) - len(qualifiers) :] == qualifiers:
                out |= {(path, line) for line in lines}
    return out


async def main(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(sysconfig.get_paths()["stdlib"])
    settings = Settings(
        _env_file=None,
        database_url=args.database_url or os.environ.get("DATABASE_URL"),
        data_dir=CACHE_DIR / "qualified-refs-db",
        allowed_paths=[root],
        job_poll_seconds=0.05,
        run_worker=False,
    )
    app = await Archivist.open(settings, FreeEmbedder())
    result: dict[str, Any] = {"machine": machine_info(), "top_level_only": args.top_level, "queries": {}}
    try:
        with use_scope(Scope.owner()):
            await app.db.pool.execute("DELETE FROM sources WHERE title = 'python-stdlib'")
            source_id, seconds = await sync_stdlib(app, root, not args.top_level)
            paths = [
                r["path"]
                for r in await app.db.pool.fetch("SELECT path FROM folder_files WHERE source_id = $1", source_id)
            ]
            uses = {}
            for path in paths:
                try:
                    uses[path] = file_uses((root / path).read_text(encoding="utf-8"))
                except (SyntaxError, UnicodeDecodeError, ValueError):
                    continue
            result["files"], result["sync_seconds"] = len(uses), round(seconds, 1)
            tp = fp = fn = 0
            latencies = []
            for query in QUERIES:
                want = expected(uses, query)
                await app.symbols.references(query, [source_id], 0, 20)  # warm
                began = time.perf_counter()
                await app.symbols.references(query, [source_id], 0, 20)
                latencies.append((time.perf_counter() - began) * 1000)
                page = await app.symbols.references(query, [source_id], 0, 1_000_000)
                got = {(h.path, h.line) for h in page.hits if h.path in uses}
                hits = len(got & want)
                tp, fp, fn = tp + hits, fp + len(got - want), fn + len(want - got)
                result["queries"][query] = {
                    "expected": len(want), "found": len(got), "recall": round(hits / max(1, len(want)), 4),
                    "precision": round(hits / max(1, len(got)), 4),
                    "missed": sorted(want - got)[:5], "extra": sorted(got - want)[:5],
                }  # fmt: skip
            result["recall"] = round(tp / max(1, tp + fn), 4)
            result["precision"] = round(tp / max(1, tp + fp), 4)
            result["p50_ms"] = round(statistics.median(latencies), 1)
    finally:
        await app.close()
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top-level", action="store_true", help="Lib/*.py only (no packages)")
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--out", type=Path, default=CACHE_DIR / "qualified_refs.json")
    args = parser.parse_args()
    outcome = asyncio.run(main(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(outcome, indent=2, default=str) + "\n")
    for query, q in outcome["queries"].items():
        print(
            f"{query}: expected {q['expected']}, found {q['found']}, recall {q['recall']}, precision {q['precision']}"
        )
    print(f"all: recall {outcome['recall']}, precision {outcome['precision']}, p50 {outcome['p50_ms']} ms")
