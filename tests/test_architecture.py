"""The import rules of docs/architecture.md, read from the source with `ast` (function-local and
TYPE_CHECKING imports count too): layers point down, the edge packages never import each other,
services stay free of transports and terminals, and nothing imports in a circle."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("access", "commands", "models", "services", "tools", "web")
TOP_MODULES = ("cli", "server")

#: rank of each layer: an import must point to a lower rank (or stay inside its own group)
RANKS = {"cli": 5, "server": 4, "edge": 3, "app": 2, "services": 1, "models": 0}
#: imports allowed between the edge packages (the reply contract lives in tools/common.py)
EDGE_ALLOWED = {("access", "tools.common")}
#: what services must never import: transports, web frameworks and terminals belong to the edge
FORBIDDEN_IN_SERVICES = ("mcp", "starlette", "argparse", "tqdm", "uvicorn", "rich")


def module_files() -> dict[str, Path]:
    files = {name: ROOT / f"{name}.py" for name in TOP_MODULES}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            files[name] = path
    return files


def imported_names(path: Path, module: str) -> set[str]:
    """Every module name `path` imports, anywhere in the file (relative imports resolved)."""
    names: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def internal_graph() -> dict[str, set[str]]:
    files = module_files()
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        targets = {name for name in imported_names(path, module) if name in files}
        graph[module] = targets - {module}
    return graph


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


def test_layers_point_down() -> None:
    wrong = []
    for module, targets in internal_graph().items():
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
    assert not wrong, "\n".join(sorted(wrong))


def test_services_import_no_transport_or_terminal() -> None:
    wrong = []
    for module, path in module_files().items():
        if group(module) not in ("services", "app", "models"):
            continue
        for name in imported_names(path, module):
            if name.split(".")[0] in FORBIDDEN_IN_SERVICES:
                wrong.append(f"{module} imports {name}")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_import_circles() -> None:
    graph = {m: {t for t in ts if not is_package_of(t, m)} for m, ts in internal_graph().items()}
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        pytest.fail(f"import circle: {' -> '.join(exc.args[1])}")


def test_services_subpackages_are_acyclic() -> None:
    """Collapse services.X.Y to services.X: the sub-packages of services form no circle either."""
    collapsed: dict[str, set[str]] = {}
    for module, targets in internal_graph().items():
        if not module.startswith("services."):
            continue
        node = ".".join(module.split(".")[:2])
        for target in targets:
            if target.startswith("services.") and ".".join(target.split(".")[:2]) != node:
                collapsed.setdefault(node, set()).add(".".join(target.split(".")[:2]))
        collapsed.setdefault(node, set())
    try:
        TopologicalSorter(collapsed).prepare()
    except CycleError as exc:
        pytest.fail(f"circle between services packages: {' -> '.join(exc.args[1])}")


def test_the_rule_catches_an_upward_import(tmp_path: Path) -> None:
    """The checker itself can fail: a services module importing tools is reported."""
    path = tmp_path / "x.py"
    path.write_text("def f():\n    from tools.common import failure\n")
    assert "tools.common" in imported_names(path, "services.x")
    assert group("tools.common") == "edge" and RANKS["edge"] > RANKS[group("services.x")]


def test_identity_is_protected() -> None:
    """Rule 5: only access/guard.py reads the SDK's access token, and only services/access/ builds a
    Scope (`Scope(...)`; entry points use its named constructors such as `Scope.owner()`)."""
    wrong = []
    for module, path in module_files().items():
        if "get_access_token" in path.read_text() and module != "access.guard":
            wrong.append(f"{module} reads the SDK's access token")
        if module.startswith("services.access"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Scope":
                wrong.append(f"{module}:{node.lineno} builds a Scope")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_scope_means_no_access() -> None:
    """Rule 5: with no scope entered, current_scope() raises instead of answering 'unrestricted'."""
    import contextvars

    from services.access.scope import NoScope, current_scope

    with pytest.raises(NoScope):
        contextvars.Context().run(current_scope)
