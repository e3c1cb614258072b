"""Move modules and tests into their homes (issue 31, items 4 and 6), replayable on any later tree.

Other branches keep changing the code while the rooms move, so the move is a program, not a commit:
run it on an integrated tree and it `git mv`s whatever still sits in an old place, then rewrites every
reference to an old name, and prints each thing it did. A second run finds nothing to do.

- services: the loose modules of `services/` go to `services/core/`, `services/access/`,
  `services/sources/` and `services/documents/` (MODULE_MOVES). `services/jobs.py`, `worker.py` and
  `ports.py` are not touched here: they go to `services/jobs/` with the job queue rewrite.
- tests: each flat `tests/test_*.py` goes to the folder that mirrors the code it tests (TEST_HOMES);
  helper modules go to `tests/support/` (TEST_SUPPORT); `tests/registry/` goes beside its test.
- references: imports are found with `ast` (`from services import embedded` becomes
  `from services.core import embedded`; `from services.sources import X` becomes
  `from services.sources.service import X` unless X is a module of the new package); dotted names
  inside strings and comments (`mock.patch`/`monkeypatch` targets, `pytest_plugins`, "module:function"
  registry strings, docstrings) and paths (`services/paths.py`, `tests/test_e2e.py`,
  `ROOT / "tests" / "crawl_worker_proc.py"`, `services/paths.caller_roots`) are rewritten token by token;
  Markdown, HTML, Makefile, TOML, YAML, `.env.example` and the CI script as text. `sql/*.sql` is never
  edited (applied migrations stay byte-for-byte).
- a moved test file sits one folder deeper, so its `Path(__file__)...parent` chains gain one level.

Usage (from the repository root, stdlib only; ruff, when found, re-sorts the imports it touched):
    python3 scripts/rooms.py           # do it (or `--only services`, then `--only tests`: one commit each)
    python3 scripts/rooms.py --check   # change nothing; exit 1 if anything is left to do
A flat test file the table does not name is reported as UNMAPPED (add a row and run again); a bare
reference to a name that is now a package (`services.sources`) is reported as AMBIGUOUS, for a person.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import shutil
import subprocess
import sys
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: this script and its test spell the old names on purpose
KEEP = {Path(__file__).resolve(), ROOT / "tests" / "scripts" / "test_rooms.py"}

#: old module -> new module. core/ is the leaf every package may use (it imports no other services
#: package); paths.py reads the caller's scope, so it lives with access (core -> access would be a circle).
MODULE_MOVES: dict[str, str] = {
    "services.settings": "services.core.settings",
    "services.database": "services.core.database",
    "services.embedded": "services.core.embedded",
    "services.supervisor": "services.core.supervisor",
    "services.errors": "services.core.errors",
    "services.validation": "services.core.validation",
    "services.memory": "services.core.memory",
    "services.budgets": "services.core.budgets",
    "services.markdown_lines": "services.core.markdown_lines",
    "services.paths": "services.access.paths",
    "services.sources": "services.sources.service",
    "services.source_titles": "services.sources.titles",
    "services.source_origin": "services.sources.origin",
    "services.versions": "services.sources.versions",
    "services.reading": "services.documents.reading",
    "services.browse": "services.documents.browse",
    "services.reembed": "services.documents.reembed",
    "services.export": "services.documents.export",
    "services.backup": "services.documents.backup",
}

#: docstrings of the packages the moves create (written only when the package does not exist yet)
NEW_PACKAGES: dict[str, str] = {
    "services/core": "Infrastructure every other services package may use: settings, the database and its\n"
    "embedded server, errors, argument checks, health, memory, the parse budgets and linear-time markdown\n"
    "line primitives. A leaf: nothing here imports another services package (tests/test_architecture.py).",
    "services/sources": "Sources: named collections of documents (service.py), found by title only among the\n"
    "caller's (titles.py), with their origin (origin.py) and versions (versions.py).",
}

#: flat test module (without .py) per home folder; a folder mirrors the code it tests
TEST_HOMES: dict[str, tuple[str, ...]] = {
    "access": (
        "test_access_audit", "test_access_dynamic", "test_access_http", "test_access_profiles",
        "test_access_ratelimit", "test_access_services", "test_access_stateless", "test_http_edges",
        "test_operations_http",
    ),
    "cli": ("test_cli", "test_cli_failures", "test_cli_output", "test_access_cli", "test_sync_cli"),
    "content": (
        "test_parsers", "test_formats", "test_docx_style_ids", "test_page_numbers", "test_openapi",
        "test_chunking", "test_code_chunking", "test_extraction_layouts", "test_pages_noindex",
        "test_text_semantics", "test_injection_flags",
    ),
    "core": ("test_env_example", "test_read_replica", "test_memory_bounds"),
    "crawl": (
        "test_auth_crawl", "test_crawl_job_spec", "test_crawl_jobs", "test_crawl_primitives", "test_crawl_tool",
        "test_extraction_crawl", "test_recrawl_shape", "test_shared_politeness", "test_sync_recrawl",
    ),
    "documents": (
        "test_core_services", "test_two_phase", "test_freshness", "test_page_graph", "test_reembed",
        "test_backup", "test_versions",
    ),
    "e2e": ("test_e2e", "test_wheel", "test_registry"),
    "embeddings": ("test_embeddings", "test_model_gate", "test_reranking", "test_late_interaction"),
    "reliability": (
        "test_reliability", "test_reliability_disk", "test_reliability_fuzz", "test_reliability_heal",
        "test_lifecycle",
    ),
    "search": (
        "test_bm25", "test_bm25_impacts", "test_exact_terms", "test_passages", "test_search_modes",
        "test_search_tuning", "test_source_order", "test_windows", "test_web_search", "test_two_phase_quality",
        "test_bench_metrics",
    ),
    "security": ("test_outbound",),
    "sync": ("test_sync", "test_sync_watch", "test_git_sources", "test_git_sources_auth"),
    "tools": (
        "test_agent_surface", "test_contract", "test_tools", "test_protocol", "test_document_fields",
        "test_writes_fail_clean", "test_mcp_skills", "test_mcp_app", "test_code_hits", "test_sdk_surface",
    ),
    "web": ("test_web_access", "test_web_console", "test_web_narrow", "test_console_profiles"),
}  # fmt: skip

#: flat test files that stay at the top: the rules of the whole tree
TEST_TOP = ("test_architecture",)

#: a test file no row names goes by its prefix (files added by branches merged later)
TEST_PREFIXES: tuple[tuple[str, str], ...] = (
    ("test_access_", "access"),
    ("test_cli", "cli"),
    ("test_crawl", "crawl"),
    ("test_sync", "sync"),
    ("test_git_", "sync"),
    ("test_web_", "web"),
    ("test_console_", "web"),
    ("test_search_", "search"),
    ("test_bm25", "search"),
    ("test_reliability", "reliability"),
    ("test_tool", "tools"),
    ("test_mcp_", "tools"),
    ("test_job", "jobs"),
)

#: helper modules of the tests (not test files) -> tests/support/
TEST_SUPPORT = (
    "corpus", "crawl_worker_proc", "fixture_site", "git_fixtures", "git_server", "git_support", "mcp_helpers",
    "openapi_specs", "web_helpers",
)  # fmt: skip

#: data folders of the tests -> beside the test that reads them
TEST_DATA: dict[str, str] = {"tests/registry": "tests/e2e/registry"}

FOLDER_DOCS: dict[str, str] = {
    "access": "Access (access/, services/access/): tokens, profiles, rate limits, audit, HTTP edges.",
    "cli": "The `archivist` command line (cli.py, commands/) through the real process.",
    "content": "What comes in: parsers, the page pipeline, chunking, OpenAPI specs, injection flags.",
    "core": "services/core/: settings, the database (and a read replica), bounded memory.",
    "crawl": "Crawling (services/crawl/, fetchers, net): jobs, the frontier, politeness, the crawl tool.",
    "documents": "Documents and sources (services/documents/, services/sources/): ingest, two-phase indexing,\n"
    "freshness, links, re-embedding, backups, versions.",
    "e2e": "End to end: the server in a subprocess, the installed wheel, the registry entry.",
    "embeddings": "Embedders and rerankers (services/embeddings/, services/reranking/) and the model gate.",
    "jobs": "The job queue and its runners (services/jobs/).",
    "reliability": "Faults: lost databases, full disks, fuzzed arguments, signals.",
    "search": "Search (services/search/): BM25, hybrid and keyword legs, passages, windows, quality.",
    "support": "Helpers the tests share (MCP clients, fixture sites, git servers); no tests here.",
    "sync": "Folder and git sources (services/sync/).",
    "tools": "The MCP tools (tools/) through real MCP clients: the contract agents see.",
    "web": "The web console (web/) in a real browser.",
}

TEXT_SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".cfg", ".ini", ".txt", ".sh", ".example", ".html"}
TEXT_NAMES = {"Makefile", "run"}
SKIP_SUFFIXES = (".sql",)  # applied migrations: never edited
LINE_LENGTH = 120  # pyproject's ruff line-length: ruff format does not reflow comments or docstrings
DOTTED = re.compile(r"(?<![\w.])((?:services|tests)(?:\.\w+)+)")
FILE_PARENTS = re.compile(r"(Path\(__file__\)(?:\.resolve\(\))?)((?:\.parent\b)+|\.parents\[(\d+)\])")


@dataclass
class Plan:
    """Everything the tables imply: dotted names, paths and `"tests" / "x"` pieces, old -> new."""

    dotted: dict[str, str] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)
    file_moves: list[tuple[str, str]] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)


@dataclass
class Report:
    check: bool
    actions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    touched_py: set[Path] = field(default_factory=set)
    created: set[Path] = field(default_factory=set)
    long_before: dict[Path, set[str]] = field(default_factory=dict)

    def did(self, line: str) -> None:
        self.actions.append(line)
        print(("would " if self.check else "") + line)


def test_home(name: str) -> str | None:
    for home, names in TEST_HOMES.items():
        if name in names:
            return home
    return next((home for prefix, home in TEST_PREFIXES if name.startswith(prefix)), None)


def build_plan(parts: Iterable[str] = ("services", "tests")) -> Plan:
    plan = Plan()
    if "services" in parts:
        for old, new in MODULE_MOVES.items():
            plan.dotted[old] = new
            plan.paths[module_path(old)] = module_path(new)
            plan.file_moves.append((module_path(old), module_path(new)))
    if "tests" in parts:
        add_test_moves(plan)
    return plan


def add_test_moves(plan: Plan) -> None:
    for home, names in TEST_HOMES.items():
        for name in names:
            add_test_move(plan, name, home)
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        if path.stem in TEST_TOP or any(path.stem in names for names in TEST_HOMES.values()):
            continue
        home = test_home(path.stem)
        if home is None:
            plan.unmapped.append(f"tests/{path.name}")
        else:
            add_test_move(plan, path.stem, home)
    for path in sorted((ROOT / "tests").glob("*/test_*.py")):  # moved by an earlier run: old names still map
        if f"tests.{path.stem}" not in plan.dotted and test_home(path.stem) == path.parent.name:
            add_test_move(plan, path.stem, path.parent.name)
    for name in TEST_SUPPORT:
        add_test_move(plan, name, "support")
    for old, new in TEST_DATA.items():
        plan.paths[old] = new
        plan.file_moves.append((old, new))


def add_test_move(plan: Plan, name: str, home: str) -> None:
    plan.dotted[f"tests.{name}"] = f"tests.{home}.{name}"
    plan.paths[f"tests/{name}.py"] = f"tests/{home}/{name}.py"
    plan.file_moves.append((f"tests/{name}.py", f"tests/{home}/{name}.py"))


def module_path(dotted: str) -> str:
    return dotted.replace(".", "/") + ".py"


def module_exists(dotted: str) -> bool:
    base = ROOT / dotted.replace(".", "/")
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


# --- moves -------------------------------------------------------------------------------------------


def git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True)


def ensure_package(folder: Path, report: Report) -> None:
    """A folder of Python modules gets an `__init__.py` with a docstring saying what it holds."""
    init = folder / "__init__.py"
    if init.exists() or init in report.created:
        return
    report.created.add(init)
    rel = folder.relative_to(ROOT).as_posix()
    doc = NEW_PACKAGES.get(rel) or FOLDER_DOCS.get(folder.name, f"Tests of {folder.name}.")
    report.did(f"create {rel}/__init__.py")
    if not report.check:
        folder.mkdir(parents=True, exist_ok=True)
        init.write_text(f'"""{doc}"""\n')
        git("add", str(init.relative_to(ROOT)))


def move_files(plan: Plan, report: Report) -> list[Path]:
    """`git mv` each old path still present; returns the moved test files (now one folder deeper)."""
    deeper: list[Path] = []
    for old, new in plan.file_moves:
        source, target = ROOT / old, ROOT / new
        if not source.exists():
            continue
        if target.exists():
            report.notes.append(f"CONFLICT: both {old} and {new} exist; merge them by hand")
            continue
        if target.suffix == ".py":
            ensure_package(target.parent, report)
        report.did(f"git mv {old} {new}")
        if not report.check:
            target.parent.mkdir(parents=True, exist_ok=True)
            git("mv", old, new)
            if old.startswith("tests/") and target.suffix == ".py":
                deeper.append(target)
    return deeper


def deepen_file_paths(files: Iterable[Path], report: Report) -> None:
    """`Path(__file__).resolve().parent.parent` in a file moved one folder down becomes `.parents[2]`."""

    def one_deeper(match: re.Match[str]) -> str:
        levels = int(match.group(3)) if match.group(3) is not None else match.group(2).count(".parent") - 1
        return f"{match.group(1)}.parents[{levels + 1}]"

    for path in files:
        text = path.read_text()
        new = FILE_PARENTS.sub(one_deeper, text)
        if new != text:
            report.did(f"deepen Path(__file__) in {path.relative_to(ROOT)}")
            report.long_before.setdefault(path, set(long_lines(text)))
            path.write_text(new)
            report.touched_py.add(path)


# --- references --------------------------------------------------------------------------------------


@dataclass
class Remapper:
    """Old name -> new name, for dotted names and paths; a name already new is left alone."""

    plan: Plan
    ambiguous: list[str] = field(default_factory=list)
    slashed: dict[str, str] = field(init=False)
    joins: dict[str, str] = field(init=False)
    slash_names: re.Pattern[str] = field(init=False)
    path_pattern: re.Pattern[str] = field(init=False)
    join_pattern: re.Pattern[str] = field(init=False)

    def dotted(self, name: str, where: str = "") -> str:
        for new in self.plan.dotted.values():
            if name == new or name.startswith(new + "."):
                return name
        old = max((o for o in self.plan.dotted if name == o or name.startswith(o + ".")), key=len, default=None)
        if old is None:
            return name
        rest = name[len(old) :]
        if rest and module_exists(old + "." + rest[1:].split(".")[0]):
            return name  # a module of the package the old name became
        if not rest and (ROOT / old.replace(".", "/") / "__init__.py").is_file():
            self.ambiguous.append(f"AMBIGUOUS: {where} names {name!r}, now a package; check by hand")
            return name
        return self.plan.dotted[old] + rest

    def __post_init__(self) -> None:
        """One pattern per kind of reference (alternations of every old name, longest first)."""
        slashed = {old.replace(".", "/"): new.replace(".", "/") for old, new in self.plan.dotted.items()}
        self.slashed, self.joins = slashed, {joined(old): joined(new) for old, new in self.plan.paths.items()}
        # `services/paths.caller_roots`: a module's path, then a name in it
        self.slash_names = alternation(slashed, r"(?<![\w/.-])", r"(?=\.(?!py\b)[A-Za-z_])")
        self.path_pattern = alternation(self.plan.paths, r"(?<![\w/.-])", r"(?![\w-])")
        self.join_pattern = alternation(self.joins, "", "")

    def text(self, text: str, where: str) -> str:
        if "services" not in text and "tests" not in text:
            return text
        text = DOTTED.sub(lambda m: self.dotted(m.group(1), where), text)
        text = self.slash_names.sub(lambda m: self.slashed[m.group(0)], text)
        text = self.path_pattern.sub(lambda m: self.plan.paths[m.group(0)], text)
        return self.joined(text)

    def joined(self, text: str) -> str:
        """`ROOT / "tests" / "crawl_worker_proc.py"`: a path spelled as pathlib parts (several tokens)."""
        return self.join_pattern.sub(lambda m: self.joins[m.group(0)], text) if '"tests"' in text else text


def joined(path: str) -> str:
    return " / ".join(f'"{part}"' for part in path.split("/"))


def alternation(names: Iterable[str], before: str, after: str) -> re.Pattern[str]:
    ordered = sorted(names, key=len, reverse=True)
    return re.compile(before + "(?:" + "|".join(map(re.escape, ordered)) + ")" + after)


def line_offsets(data: bytes) -> list[int]:
    offsets = [0]
    for line in data.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    return offsets


def import_statement(module: str, aliases: list[ast.alias]) -> str:
    names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in aliases)
    return f"from {module} import {names}"


def rewrite_import_from(node: ast.ImportFrom, segment: str, remap: Remapper, indent: str) -> str | None:
    """The new text of one `from X import a, b`, or None when it stays."""
    if node.level or not node.module:
        return None
    groups: dict[str, list[ast.alias]] = {}
    for alias in node.names:
        full = f"{node.module}.{alias.name}"
        moved = remap.dotted(full) if alias.name != "*" else full
        if moved != full and not module_exists(full):
            parent, _, leaf = moved.rpartition(".")
            asname = alias.asname or (alias.name if leaf != alias.name else None)
            groups.setdefault(parent, []).append(ast.alias(name=leaf, asname=asname))
            continue
        target = node.module if module_exists(full) else remap.dotted(node.module)
        groups.setdefault(target, []).append(alias)
    if list(groups) == [node.module]:
        return None
    if len(groups) == 1:
        (module,) = groups
        if [(a.name, a.asname) for a in groups[module]] == [(a.name, a.asname) for a in node.names]:
            return re.sub(r"^from\s+" + re.escape(node.module), f"from {module}", segment, count=1)
    return ("\n" + indent).join(import_statement(m, aliases) for m, aliases in groups.items())


def rewrite_import(node: ast.Import, remap: Remapper) -> str | None:
    names = [(remap.dotted(a.name), a.asname) for a in node.names]
    if names == [(a.name, a.asname) for a in node.names]:
        return None
    return "import " + ", ".join(n + (f" as {a}" if a else "") for n, a in names)


def rewrite_imports(source: str, remap: Remapper, where: str) -> str:
    data = source.encode()
    starts = line_offsets(data)
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(ast.parse(source, where)):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        begin = starts[node.lineno - 1] + node.col_offset
        end = starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[operator]
        segment = data[begin:end].decode()
        line = data[starts[node.lineno - 1] : begin].decode()
        indent = line if not line.strip() else ""
        if isinstance(node, ast.ImportFrom):
            new = rewrite_import_from(node, segment, remap, indent)
        else:
            new = rewrite_import(node, remap)
        if new is not None and new != segment:
            edits.append((begin, end, new))
    for begin, end, new in sorted(edits, reverse=True):
        data = data[:begin] + new.encode() + data[end:]
    return data.decode()


def rewrite_tokens(source: str, remap: Remapper, where: str) -> str:
    """Dotted names and paths inside string literals and comments (code is left to `ast`)."""
    starts = [0]
    for line in io.StringIO(source).readlines():  # the lines tokenize counts
        starts.append(starts[-1] + len(line))
    edits: list[tuple[int, int, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in (tokenize.STRING, tokenize.COMMENT):
            continue
        new = remap.text(tok.string, f"{where}:{tok.start[0]}")
        if new != tok.string:
            begin = starts[tok.start[0] - 1] + tok.start[1]
            edits.append((begin, starts[tok.end[0] - 1] + tok.end[1], new))
    for begin, end, new in sorted(edits, reverse=True):
        source = source[:begin] + new + source[end:]
    return source


def text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\n")
    files = []
    for rel in filter(None, listed):
        path = ROOT / rel
        if path in KEEP or rel.endswith(SKIP_SUFFIXES) or not path.is_file():
            continue
        if path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES:
            files.append(path)
    return files


def rewrite_references(plan: Plan, report: Report) -> None:
    remap = Remapper(plan)
    for path in text_files():
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        if path.suffix == ".py":
            try:
                new = remap.joined(rewrite_tokens(rewrite_imports(text, remap, rel), remap, rel))
            except SyntaxError as exc:
                report.notes.append(f"SKIPPED (does not parse): {rel}: {exc}")
                continue
        else:
            new = remap.text(text, rel)
        if new != text:
            report.did(f"rewrite references in {rel}")
            report.long_before.setdefault(path, set(long_lines(text)))
            if not report.check:
                path.write_text(new)
                if path.suffix == ".py":
                    report.touched_py.add(path)
    report.notes.extend(sorted(set(remap.ambiguous)))


def long_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > LINE_LENGTH]


def name_new_long_lines(report: Report) -> None:
    """Lines a rewrite made longer than ruff allows and ruff format could not wrap (comments, docstrings)."""
    for path in sorted(report.touched_py):
        lines = path.read_text().splitlines()
        before = report.long_before.get(path, set())
        for number, line in enumerate(lines, 1):
            if len(line) > LINE_LENGTH and line not in before:
                report.notes.append(f"LONG LINE (reflow by hand): {path.relative_to(ROOT)}:{number}")


def ruff_command() -> list[str] | None:
    """ruff from the checkout's interpreter, the one running this script, or PATH."""
    for python in (ROOT / ".venv" / "bin" / "python", Path(sys.executable)):
        if not python.exists():
            continue
        probe = subprocess.run([str(python), "-m", "ruff", "--version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return [str(python), "-m", "ruff"]
    found = shutil.which("ruff")
    return [found] if found else None


def tidy(files: set[Path]) -> None:
    """Re-sort the imports and re-wrap the lines of the files touched (ruff, when it is installed)."""
    if not files:
        return
    command = ruff_command()
    if command is None:
        print("ruff not found: run `ruff check --fix --select I . && ruff format .` yourself")
        return
    names = sorted(str(p) for p in files if p.exists())
    subprocess.run([*command, "check", "--quiet", "--fix", "--select", "I", *names], cwd=ROOT, check=False)
    subprocess.run([*command, "format", "--quiet", *names], cwd=ROOT, check=False)
    print(f"ruff: sorted imports and formatted {len(names)} file(s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if anything is left to do")
    parser.add_argument("--only", choices=("services", "tests"), help="one half (one commit each); default both")
    args = parser.parse_args(argv)
    report = Report(check=args.check)
    plan = build_plan([args.only] if args.only else ("services", "tests"))
    deeper = move_files(plan, report)
    pending = report.check and bool(report.actions)
    if not pending:  # with moves pending, a check cannot tell which references will need a rewrite
        deepen_file_paths(deeper, report)
        rewrite_references(plan, report)
    if not args.check:
        tidy(report.touched_py)
        name_new_long_lines(report)
    for name in plan.unmapped:
        report.notes.append(f"UNMAPPED: {name}: add it to TEST_HOMES (or TEST_TOP) and run again")
    for note in report.notes:
        print(note)
    print(f"{len(report.actions)} action(s); {len(report.notes)} note(s)")
    return 1 if args.check and (report.actions or plan.unmapped) else 0


if __name__ == "__main__":
    sys.exit(main())
