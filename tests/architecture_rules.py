"""The checks behind tests/test_architecture.py, as functions over source text, so each rule can also
be shown to fail on a planted violation (docs/architecture.md lists the rules).

Everything is read with `ast`: function-local and TYPE_CHECKING imports count, and so do imports
spelled as calls (`importlib.import_module("x")`, `__import__("x")`) and registry strings naming a
module (`"services.crawl.runner:run_job"`)."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("access", "commands", "models", "services", "tools", "web")
TOP_MODULES = ("cli", "server")

#: rank of each layer: an import must point to a lower rank (or stay inside its own group)
RANKS = {"cli": 5, "server": 4, "edge": 3, "app": 2, "services": 1, "models": 0}
#: imports allowed between the edge packages (the reply contract lives in tools/common.py)
EDGE_ALLOWED = {("access", "tools.common")}
#: what services must never import: transports, web frameworks and terminals belong to the edge
FORBIDDEN_IN_SERVICES = ("mcp", "starlette", "argparse", "tqdm", "uvicorn", "rich")
STD_STREAMS = frozenset({"stdout", "stdin", "__stdout__", "__stdin__"})

SCOPE_MODULE = "services.access.scope"
#: Scope's named constructors: only services/access calls them (and the CLI's entry, `owner`)
SCOPE_CONSTRUCTORS = frozenset({"owner", "unrestricted", "for_job", "of_profiles"})
#: the SDK's record of the verified bearer token: only access/guard.py reads it
TOKEN_READERS = frozenset({"get_access_token", "auth_context_var", "AuthenticatedUser"})
TOKEN_MODULE = "mcp.server.auth.middleware.auth_context"
#: calls that copy an object with changed fields (or change a frozen one): never on a Scope outside its home
COPIERS = {"dataclasses": {"replace"}, "copy": {"replace", "copy", "deepcopy"}}
COPY_METHODS = frozenset({"model_copy", "__replace__", "_replace"})
#: the loopback rule's own words: written once, in services/access/hosts.py
LOOPBACK_WORDS = frozenset({"127.0.0.1", "::1", "[::1]", "localhost", "127.0.0.0/8"})
LOOPBACK_HOME = "services.access.hosts"
#: "does any token exist" (and every other statement on the tokens table) lives in services/access/tokens.py
TOKENS_HOME = "services.access.tokens"
REGISTRY_STRING = re.compile(r"([A-Za-z_][\w.]*):[A-Za-z_]\w*")


@functools.cache
def parse(source: str) -> ast.Module:
    """One tree per source for every rule (read only): each rule parsed and walked every module again,
    ~20 s of CPU a rule on a loaded 2-core machine."""
    return ast.parse(source)


@functools.cache
def every_node(tree: ast.AST) -> tuple[ast.AST, ...]:
    """`ast.walk(tree)` (the same order), walked once per tree."""
    return tuple(ast.walk(tree))


def module_files() -> dict[str, Path]:
    files = {name: ROOT / f"{name}.py" for name in TOP_MODULES}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            files[name] = path
    return files


def sources() -> Iterator[tuple[str, str, bool]]:
    """(module, source text, is a package __init__) of every module under the rules."""
    for module, path in module_files().items():
        yield module, path.read_text(), path.name == "__init__.py"


def resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute module a (relative) `from ... import` names."""
    if not level:
        return name or ""
    package = module if is_package else module.rpartition(".")[0]
    parts = package.split(".")
    anchor = parts[: len(parts) - level + 1]
    return ".".join([*anchor, name] if name else anchor)


def constant_text(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def called_name(node: ast.Call) -> str:
    """`f` of f(...), `import_module` of importlib.import_module(...)."""
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def imported_names(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module name the source imports, anywhere (relative imports resolved, constant dynamic imports
    and "module:attr" registry strings included)."""
    names: set[str] = set()
    tree = parse(source)
    loaders = {"import_module", "__import__"} | {
        alias.asname or alias.name
        for node in every_node(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "importlib"
        for alias in node.names
        if alias.name == "import_module"
    }
    for node in every_node(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = resolve(module, is_package, node.level, node.module)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and called_name(node) in loaders and node.args:
            target = constant_text(node.args[0])
            if target is not None:
                package = constant_text(node.args[1]) if len(node.args) > 1 else None
                level = len(target) - len(target.lstrip("."))
                names.add(resolve(package or module, True, level, target.lstrip(".") or None) if level else target)
        elif (text := constant_text(node)) is not None and (match := REGISTRY_STRING.fullmatch(text)):
            names.add(match.group(1))
    return names


def graph_of(modules: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """module -> the modules among `modules` it imports, from (source, is_package) pairs."""
    graph: dict[str, set[str]] = {}
    for module, (source, is_package) in modules.items():
        targets = {name for name in imported_names(source, module, is_package) if name in modules}
        graph[module] = targets - {module}
    return graph


def internal_graph() -> dict[str, set[str]]:
    return graph_of({module: (source, package) for module, source, package in sources()})


def group(module: str) -> str:
    head = module.split(".")[0]
    if head in ("cli", "commands"):
        return "cli"
    if head == "server":
        return "server"
    if head in ("tools", "web", "access"):
        return "edge"
    if module == "services.app":
        return "app"
    return "services" if head == "services" else "models"


def is_package_of(parent: str, child: str) -> bool:
    return child.startswith(parent + ".")


def layer_problems(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, targets in graph.items():
        for target in targets:
            if is_package_of(target, module):
                continue  # a module may import its own package's __init__
            mine, theirs = group(module), group(target)
            if mine == theirs == "edge":
                here, there = module.split(".")[0], target.split(".")[0]
                if here != there and (here, target) not in EDGE_ALLOWED:
                    wrong.append(f"{module} -> {target} (edge packages never import each other)")
            elif mine != theirs and RANKS[theirs] > RANKS[mine]:
                wrong.append(f"{module} -> {target} ({mine} may not import {theirs})")
    return sorted(wrong)


def transport_problems(module: str, source: str, is_package: bool = False) -> list[str]:
    """Services and models import no transport or terminal, and never write to stdout or read stdin
    (stdout belongs to the MCP stdio transport; logging goes to stderr)."""
    if group(module) not in ("services", "app", "models"):
        return []
    tree = parse(source)
    wrong = [
        f"{module} imports {name}"
        for name in sorted(imported_names(source, module, is_package))
        if name.split(".")[0] in FORBIDDEN_IN_SERVICES
    ]
    for node in every_node(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("print", "input"):
            wrong.append(f"{module}:{node.lineno} calls {node.func.id}()")
        elif isinstance(node, ast.Attribute) and node.attr in STD_STREAMS and ast.unparse(node.value) == "sys":
            wrong.append(f"{module}:{node.lineno} uses {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and node.module == "sys":
            wrong += [f"{module}:{node.lineno} imports sys.{a.name}" for a in node.names if a.name in STD_STREAMS]
    return wrong


class ScopeNames:
    """The names a module binds to the Scope class, to its module, and to the copy functions, however
    they are spelled (`from ... import Scope as X`, `S = Scope`, `import services.access.scope as m`)."""

    def __init__(self, module: str, tree: ast.Module, is_package: bool) -> None:
        self.classes: set[str] = {"Scope"}
        self.modules: set[str] = set()
        self.copiers: set[str] = set()  # replace, copy, deepcopy imported by name
        self.copier_modules: dict[str, str] = {}  # local name -> dataclasses / copy
        self.scopeish: set[str] = set()
        for node in every_node(tree):
            if isinstance(node, ast.ImportFrom):
                self.bind_from(resolve(module, is_package, node.level, node.module), node.names)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in COPIERS:
                        self.copier_modules[alias.asname or alias.name] = alias.name
                    elif alias.name == SCOPE_MODULE and alias.asname:
                        self.modules.add(alias.asname)
        for _ in range(3):  # aliases of aliases
            for node in every_node(tree):
                if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in (t for t in targets if isinstance(t, ast.Name)):
                        self.bind_assigned(target.id, node.value)

    def bind_from(self, base: str, names: list[ast.alias]) -> None:
        for alias in names:
            local = alias.asname or alias.name
            if base == SCOPE_MODULE and alias.name == "Scope":
                self.classes.add(local)
            elif f"{base}.{alias.name}" == SCOPE_MODULE:
                self.modules.add(local)
            elif alias.name in COPIERS.get(base, ()):
                self.copiers.add(local)

    def bind_assigned(self, name: str, value: ast.expr) -> None:
        if self.is_class(value):
            self.classes.add(name)
        elif isinstance(value, ast.Call) and called_name(value) in ("import_module", "__import__"):
            if value.args and constant_text(value.args[0]) == SCOPE_MODULE:
                self.modules.add(name)
        elif self.is_scopeish(value):
            self.scopeish.add(name)

    def is_class(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.classes
        if isinstance(node, ast.Attribute) and node.attr == "Scope":
            value = node.value
            return (isinstance(value, ast.Name) and value.id in self.modules) or ast.unparse(value) == SCOPE_MODULE
        if isinstance(node, ast.Attribute) and node.attr == "__class__":
            return self.is_scopeish(node.value)
        if isinstance(node, ast.Call) and called_name(node) == "getattr" and len(node.args) >= 2:
            return constant_text(node.args[1]) == "Scope"
        if isinstance(node, ast.Call) and called_name(node) == "type" and len(node.args) == 1:
            return self.is_scopeish(node.args[0])
        return False

    def is_scopeish(self, node: ast.expr) -> bool:
        """A value that reads as a scope: named so, or bound to such a value."""
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        return "scope" in ast.unparse(node).lower() or bool(names & self.scopeish)

    def copies_scope(self, node: ast.Call) -> bool:
        func, first = node.func, node.args[0] if node.args else None
        if isinstance(func, ast.Attribute) and func.attr in COPY_METHODS:
            return self.is_scopeish(func.value)
        if first is None:
            return False
        if isinstance(func, ast.Name) and func.id in self.copiers:
            return self.is_scopeish(first)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            module = self.copier_modules.get(func.value.id)
            if module is not None and func.attr in COPIERS[module]:
                return self.is_scopeish(first)
            if func.value.id == "object" and func.attr == "__setattr__":
                return self.is_scopeish(first)
        return False


def identity_problems(module: str, source: str, is_package: bool = False) -> list[str]:
    """Rule 5: only access/guard.py reads the SDK's verified token; only services/access/ builds, copies or
    changes a Scope (its named constructors included); `Scope.owner()` elsewhere only at the CLI's entry."""
    tree = parse(source)
    wrong = []
    if module != "access.guard":
        wrong += [f"{module}:{line} reads the SDK's access token ({what})" for line, what in token_reads(tree)]
        if any(name.startswith(TOKEN_MODULE) for name in imported_names(source, module, is_package)):
            wrong.append(f"{module} imports {TOKEN_MODULE}")
    if module.startswith("services.access"):
        return wrong
    names = ScopeNames(module, tree, is_package)
    for node in every_node(tree):
        if isinstance(node, ast.Call) and names.is_class(node.func):
            wrong.append(f"{module}:{node.lineno} builds a Scope")
        elif isinstance(node, ast.Attribute) and node.attr in SCOPE_CONSTRUCTORS and names.is_class(node.value):
            if not (node.attr == "owner" and module == "cli"):
                wrong.append(f"{module}:{node.lineno} uses Scope.{node.attr}() (a named way in of services/access)")
        elif isinstance(node, ast.Call) and names.copies_scope(node):
            wrong.append(f"{module}:{node.lineno} copies or changes a Scope ({ast.unparse(node.func)})")
        elif isinstance(node, ast.ImportFrom) and resolve(module, is_package, node.level, node.module) == SCOPE_MODULE:
            wrong += [f"{module}:{node.lineno} imports {a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Attribute) and node.attr == "_current" and names.is_scopeish(node.value):
            wrong.append(f"{module}:{node.lineno} reaches the scope's context variable")
    return wrong


def token_reads(tree: ast.Module) -> Iterator[tuple[int, str]]:
    for node in every_node(tree):
        if isinstance(node, ast.Name) and node.id in TOKEN_READERS:
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute) and node.attr in TOKEN_READERS:
            yield node.lineno, node.attr
        elif isinstance(node, ast.ImportFrom | ast.Import):
            yield from ((node.lineno, a.name) for a in node.names if a.name.split(".")[-1] in TOKEN_READERS)
        elif constant_text(node) in TOKEN_READERS:
            yield getattr(node, "lineno", 0), str(constant_text(node))


def loopback_problems(module: str, source: str) -> list[str]:
    """One home each for "is this host loopback" (services/access/hosts.py) and "does any token exist"
    (services/access/tokens.py): a second copy of either is refused where it shows, i.e. a loopback
    literal compared or listed, an `.is_loopback` test, SQL on the tokens table."""
    tree = parse(source)
    wrong = []
    ssrf_check = module.startswith("services.net")  # every kind of address, for outbound requests
    for node in every_node(tree):
        if module != LOOPBACK_HOME:
            if isinstance(node, ast.Compare) and any(loopback_words(n) for n in (node.left, *node.comparators)):
                wrong.append(f"{module}:{node.lineno} compares with a loopback name")
            elif isinstance(node, ast.Tuple | ast.List | ast.Set) and len(loopback_words(node)) >= 2:
                wrong.append(f"{module}:{node.lineno} lists loopback names")
            elif isinstance(node, ast.Attribute) and node.attr == "is_loopback" and not ssrf_check:
                wrong.append(f"{module}:{node.lineno} tests .is_loopback")
        text = constant_text(node)
        if module != TOKENS_HOME and text is not None and re.search(r"\baccess_tokens\b", text):
            wrong.append(f"{module}:{getattr(node, 'lineno', 0)} queries the tokens table")
    return wrong


def loopback_words(node: ast.expr) -> set[str]:
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return {text.lower() for item in items if (text := constant_text(item)) and text.lower() in LOOPBACK_WORDS}


IDENTITY_MODULE = "services.access.identity"


def seam_problems(module: str, source: str, is_package: bool = False) -> list[str]:
    """The seams of issue 40: a scope is narrowed only below the edges (services/: a search's profile,
    services/search/query.py), and only services/access/ builds a `Caller` (from a token:
    services/access/gate.caller_from_token), so a caller is worked out one way for every edge."""
    tree = parse(source)
    wrong = []
    if not module.startswith("services."):
        for node in every_node(tree):
            if isinstance(node, ast.Attribute) and node.attr == "narrowed":
                wrong.append(f"{module}:{node.lineno} narrows a scope (.narrowed: services/ decide a search's scope)")
            elif isinstance(node, ast.Call) and called_name(node) == "getattr" and len(node.args) > 1:
                if constant_text(node.args[1]) == "narrowed":
                    wrong.append(f"{module}:{node.lineno} narrows a scope (getattr .narrowed)")
    if module.startswith("services.access"):
        return wrong
    callers = {"Caller"}
    for node in every_node(tree):
        if isinstance(node, ast.ImportFrom):
            base = resolve(module, is_package, node.level, node.module)
            for alias in node.names:
                if base == IDENTITY_MODULE and alias.name == "Caller":
                    callers.add(alias.asname or alias.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in callers:
            callers.update(t.id for t in node.targets if isinstance(t, ast.Name))
    for node in every_node(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        builds = isinstance(func, ast.Name) and func.id in callers
        builds = builds or isinstance(func, ast.Attribute) and func.attr == "Caller"
        builds = builds or (
            called_name(node) == "getattr" and len(node.args) > 1 and constant_text(node.args[1]) == "Caller"
        )
        if builds:
            wrong.append(f"{module}:{node.lineno} builds a Caller (services/access/gate.caller_from_token does)")
    return wrong


#: one owner per table: only services/documents/ writes `documents` and `chunks`, only services/jobs/ runs
#: SQL on the jobs table (`crawl_jobs`), every statement of which is spelled in services/jobs/sql.py
DOCUMENTS_HOME = "services.documents"
JOBS_HOME = "services.jobs"
JOBS_SQL = "services.jobs.sql"
#: the flag scanner sets `chunks.flags` of stored chunks; services/flags sits below services/documents (which
#: flags every chunk it writes), so it cannot call up into it: the one writer beside the home
DOCUMENT_WRITERS_BESIDE = frozenset({"services.flags.store"})
DOCUMENT_TABLES = ("documents", "chunks")
DOCUMENT_WRITE = re.compile(
    r"\b(?:INSERT\s+INTO|DELETE\s+FROM|MERGE\s+INTO|TRUNCATE(?:\s+TABLE)?)\s+(?:ONLY\s+)?(documents|chunks)\b"
    r"|\bUPDATE\s+(?:ONLY\s+)?(documents|chunks)\b(?:\s+(?:AS\s+)?\w+)?\s+SET\b",
    re.IGNORECASE,
)
JOBS_TABLE = re.compile(r"\bcrawl_jobs\b", re.IGNORECASE)
COPY_CALLS = frozenset({"copy_records_to_table", "copy_to_table"})


def in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def sql_texts(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, text) of every string in the source: constants (implicitly joined ones are one), f-strings
    with their fields as `{}`, and constants joined with `+`."""
    for node in every_node(tree):
        if isinstance(node, ast.JoinedStr):
            parts = [constant_text(v) if isinstance(v, ast.Constant) else "{}" for v in node.values]
            yield node.lineno, "".join(p or "" for p in parts)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            pieces = [constant_text(n) for n in (node.left, node.right)]
            if all(p is not None for p in pieces):
                yield node.lineno, "".join(p or "" for p in pieces)
        elif (text := constant_text(node)) is not None:
            yield getattr(node, "lineno", 0), text


def copied_table(node: ast.Call) -> str | None:
    """The table a COPY call (asyncpg's copy_records_to_table / copy_to_table) writes, when spelled out."""
    if called_name(node) not in COPY_CALLS:
        return None
    named = [k.value for k in node.keywords if k.arg == "table_name"]
    return constant_text(node.args[0] if node.args else named[0] if named else None)


def table_owner_problems(module: str, source: str, is_package: bool = False) -> list[str]:
    """One owner per table: INSERT / UPDATE / DELETE / COPY on `documents` or `chunks` outside services/
    documents/ (and the flag scanner), and any SQL on the jobs table, or an import of its statements,
    outside services/jobs/."""
    tree = parse(source)
    wrong = []
    documents_home = in_package(module, DOCUMENTS_HOME) or module in DOCUMENT_WRITERS_BESIDE
    jobs_home = in_package(module, JOBS_HOME)
    for line, text in sql_texts(tree):
        if not documents_home and (match := DOCUMENT_WRITE.search(text)):
            table = match.group(1) or match.group(2)
            wrong.append(f"{module}:{line} writes the {table} table (only services/documents/ does)")
        if not jobs_home and JOBS_TABLE.search(text):
            wrong.append(f"{module}:{line} runs SQL on the jobs table (only services/jobs/ does)")
    for node in every_node(tree):
        if not documents_home and isinstance(node, ast.Call) and copied_table(node) in DOCUMENT_TABLES:
            wrong.append(
                f"{module}:{node.lineno} copies into the {copied_table(node)} table (only services/documents/)"
            )
    if not jobs_home and any(in_package(name, JOBS_SQL) for name in imported_names(source, module, is_package)):
        wrong.append(f"{module} imports {JOBS_SQL} (its statements run only inside services/jobs/)")
    return sorted(set(wrong))
