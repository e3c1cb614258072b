"""The rules of docs/architecture.md, read from the source with `ast` (tests/architecture_rules.py):
layers point down, the edge packages never import each other, services stay free of transports and
terminals, nothing imports in a circle, identity is worked out in one place, the loopback rule and
"does any token exist" each have one home, and each table has one owner (documents and chunks:
services/documents/; the jobs table: services/jobs/). Each rule is also shown to catch a planted violation."""

from __future__ import annotations

import contextvars
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

from tests.architecture_rules import (
    ROOT,
    graph_of,
    identity_problems,
    imported_names,
    internal_graph,
    is_package_of,
    layer_problems,
    loopback_problems,
    seam_problems,
    sources,
    table_owner_problems,
    transport_problems,
)

#: the only modules loose in services/: the composition root, and health, which reports on every package
#: (database, embedder, audit, job queue) and so sits beside the root, above them all
LOOSE_SERVICES = {"__init__", "app", "health"}


def test_layers_point_down() -> None:
    wrong = layer_problems(internal_graph())
    assert not wrong, "\n".join(wrong)


def test_services_import_no_transport_or_terminal() -> None:
    wrong = [p for module, source, package in sources() for p in transport_problems(module, source, package)]
    assert not wrong, "\n".join(sorted(wrong))


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        TopologicalSorter({m: {t for t in ts if not is_package_of(t, m)} for m, ts in graph.items()}).prepare()
    except CycleError as exc:
        return list(exc.args[1])
    return None


def test_no_import_circles() -> None:
    circle = cycle_in(internal_graph())
    assert circle is None, f"import circle: {' -> '.join(circle or [])}"


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


def test_services_core_is_a_leaf() -> None:
    """services/core/ (settings, database, errors, ...) is what every package may use, so it uses none."""
    wrong = [
        f"{module} -> {target}"
        for module, targets in internal_graph().items()
        if module.startswith("services.core")
        for target in targets
        if target.startswith("services.") and not target.startswith("services.core")
    ]
    assert not wrong, "\n".join(sorted(wrong))


def test_every_module_has_a_home() -> None:
    """No loose modules in services/ but the composition root, and tests mirror the code: no test file
    at the top of tests/ but this one (`python3 scripts/rooms.py` moves what a merge brings back)."""
    loose = {path.stem for path in (ROOT / "services").glob("*.py")} - LOOSE_SERVICES
    flat = {path.name for path in (ROOT / "tests").glob("test_*.py")} - {Path(__file__).name}
    assert not loose, f"loose in services/: {sorted(loose)}"
    assert not flat, f"flat in tests/: {sorted(flat)}"


def test_identity_is_protected() -> None:
    """Rule 5: only access/guard.py reads the SDK's access token; only services/access/ builds, copies
    or changes a Scope; `Scope.owner()` elsewhere only at the CLI's entry."""
    wrong = [p for module, source, package in sources() for p in identity_problems(module, source, package)]
    assert not wrong, "\n".join(sorted(wrong))


def test_loopback_and_token_rules_have_one_home() -> None:
    wrong = [p for module, source, _ in sources() for p in loopback_problems(module, source)]
    assert not wrong, "\n".join(sorted(wrong))


def test_scopes_are_narrowed_and_callers_built_below_the_edges() -> None:
    """Issue 40: no `Scope.narrowed` outside services/ (a search's profile is the search use case's,
    services/search/query.py); only services/access/ builds a Caller (gate.caller_from_token)."""
    wrong = [p for module, source, package in sources() for p in seam_problems(module, source, package)]
    assert not wrong, "\n".join(sorted(wrong))


def test_each_table_has_one_owner() -> None:
    """Only services/documents/ writes documents and chunks; only services/jobs/ runs SQL on the jobs table."""
    wrong = [p for module, source, package in sources() for p in table_owner_problems(module, source, package)]
    assert not wrong, "\n".join(sorted(wrong))


def test_no_scope_means_no_access() -> None:
    """Rule 5: with no scope entered, current_scope() raises instead of answering 'unrestricted'."""
    from services.access.scope import NoScope, current_scope

    with pytest.raises(NoScope):
        contextvars.Context().run(current_scope)


# --- each rule catches a planted violation --------------------------------------------------------


def test_planted_upward_import_is_caught() -> None:
    """A function-local import of tools from a service."""
    planted = "def f():\n    from tools.common import failure\n"
    graph = graph_of({"services.x": (planted, False), "tools.common": ("", False)})
    assert layer_problems(graph) == ["services.x -> tools.common (services may not import edge)"]


@pytest.mark.parametrize(
    "source",
    [
        "import importlib\ndef f():\n    return importlib.import_module('tools.common')\n",
        "from importlib import import_module as load\nmod = load('tools.common')\n",
        "mod = __import__('tools.common')\n",
        "import importlib\nmod = importlib.import_module('.common', 'tools')\n",
        "RUNNERS = {'x': 'tools.common:failure'}\n",
    ],
    ids=["import_module", "aliased", "__import__", "relative", "registry-string"],
)
def test_planted_dynamic_import_is_caught(source: str) -> None:
    """An import spelled as a call with a constant name (or a registry string) is an import."""
    assert "tools.common" in imported_names(source, "services.x")
    graph = graph_of({"services.x": (source, False), "tools.common": ("import services.x\n", False)})
    assert layer_problems(graph) == ["services.x -> tools.common (services may not import edge)"]
    assert cycle_in(graph) is not None


WIDENING = [
    "from dataclasses import replace\nfrom services.access.scope import current_scope\n"
    "wide = replace(current_scope(), source_ids=None)\n",
    "import dataclasses\ndef f(scope):\n    return dataclasses.replace(scope, read_only=False)\n",
    "import copy\ndef f(scope):\n    return copy.replace(scope, source_ids=None)\n",
    "from copy import copy as cp\ndef f(my_scope):\n    return cp(my_scope)\n",
    "def f(scope):\n    return scope.model_copy(update={'source_ids': None})\n",
    "def f(scope):\n    object.__setattr__(scope, 'source_ids', None)\n",
    "from dataclasses import replace as r\nfrom services.access.scope import entered_scope\n"
    "s = entered_scope()\nt = r(s, local_owner=True)\n",
]
BUILDING = [
    "from services.access.scope import Scope\nS = Scope\ns = S(source_ids=None)\n",
    "from services.access.scope import Scope as X\ns = X(source_ids=None, read_only=False)\n",
    "from services.access import scope as m\ns = m.Scope()\n",
    "import services.access.scope\ns = services.access.scope.Scope()\n",
    "import importlib\nm = importlib.import_module('services.access.scope')\ns = m.Scope()\n",
    "from services.access import scope\ns = getattr(scope, 'Scope')()\n",
    "def f(scope):\n    return type(scope)(source_ids=None)\n",
    "from services.access.scope import Scope as X\nY = X\ns = Y.owner()\n",
    "from services.access.scope import Scope\ns = Scope.unrestricted('me')\n",
    "from services.access.scope import _current\n",
]
TOKEN_READS = [
    "from mcp.server.auth.middleware.auth_context import auth_context_var\nuser = auth_context_var.get()\n",
    "from mcp.server.auth.middleware import auth_context\nuser = auth_context.auth_context_var.get()\n",
    "from mcp.server.auth.middleware.auth_context import get_access_token as who\n",
    "def f(scope):\n    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser\n"
    "    return isinstance(scope.get('user'), AuthenticatedUser)\n",
    "import importlib\nm = importlib.import_module('mcp.server.auth.middleware.auth_context')\n",
]


@pytest.mark.parametrize("source", WIDENING + BUILDING + TOKEN_READS)
def test_planted_identity_violation_is_caught(source: str) -> None:
    assert identity_problems("web.x", source), source


def test_identity_rule_allows_its_homes() -> None:
    """The same source is fine in its home: services/access builds scopes, access/guard reads the token,
    the CLI's entry says `Scope.owner()` out loud."""
    assert not identity_problems("services.access.x", BUILDING[0] + WIDENING[0])
    assert not identity_problems("access.guard", TOKEN_READS[0])
    assert not identity_problems("cli", "from services.access.scope import Scope\ns = Scope.owner()\n")
    assert identity_problems("commands.x", "from services.access.scope import Scope\ns = Scope.owner()\n")


@pytest.mark.parametrize(
    "source",
    ["print('hello')\n", "name = input()\n", "import sys\nsys.stdout.write('x')\n", "from sys import stdin\n"],
)
def test_planted_terminal_use_in_a_service_is_caught(source: str) -> None:
    assert transport_problems("services.x", source)
    assert not transport_problems("commands.x", source)  # the command line may talk to the terminal


@pytest.mark.parametrize(
    "source",
    [
        "def f(host):\n    return host in ('localhost', '::1')\n",
        "def f(host):\n    return host == '127.0.0.1'\n",
        "LOOPBACK = ['127.0.0.1', '[::1]']\n",
        "import ipaddress\ndef f(host):\n    return ipaddress.ip_address(host).is_loopback\n",
        "SQL = 'SELECT EXISTS (SELECT 1 FROM access_tokens WHERE revoked_at IS NULL)'\n",
    ],
)
def test_planted_second_loopback_or_token_rule_is_caught(source: str) -> None:
    assert loopback_problems("web.x", source), source


NARROWING = [
    "from services.access.scope import current_scope\nscope = current_scope().narrowed(frozenset(), [])\n",
    "def f(scope, ids):\n    return scope.narrowed(ids, scope.profiles)\n",
    "def f(scope):\n    return getattr(scope, 'narrowed')(None, [])\n",
]
CALLER_BUILDING = [
    "from services.access.identity import Caller\ncaller = Caller(token='t', profiles=('p',))\n",
    "from services.access.identity import Caller as C\ncaller = C(transport='console')\n",
    "from services.access import identity\ncaller = identity.Caller(token='t')\n",
    "from services.access.identity import Caller\nMake = Caller\ncaller = Make(token='t')\n",
    "import services.access.identity as i\ncaller = getattr(i, 'Caller')(token='t')\n",
]


@pytest.mark.parametrize("source", NARROWING + CALLER_BUILDING)
def test_planted_seam_violation_is_caught(source: str) -> None:
    assert seam_problems("web.x", source), source
    assert seam_problems("tools.x", source), source


def test_seam_rules_allow_their_homes() -> None:
    """services/ narrow a search's scope; services/access/ builds callers (and may narrow)."""
    assert not seam_problems("services.search.query", NARROWING[1])
    assert seam_problems("services.search.query", CALLER_BUILDING[0])
    assert not seam_problems("services.access.gate", CALLER_BUILDING[0] + NARROWING[1])
    assert not seam_problems(
        "web.x", "from services.access.identity import Caller\ndef f(c: Caller) -> Caller:\n    return c\n"
    )


DOCUMENT_WRITES = [
    "SQL = 'UPDATE documents SET metadata = metadata || $2 WHERE id = $1'\n",
    "SQL = (\n    'UPDATE chunks c SET context = $2 '\n    'WHERE c.document_id = $1'\n)\n",
    "def f(t):\n    return f'update documents AS d set title = {t} WHERE d.id = $1'\n",
    "SQL = 'WITH f AS (SELECT 1) DELETE FROM chunks WHERE document_id = $1'\n",
    "SQL = 'INSERT INTO documents (source_id, title) VALUES ($1, $2)'\n",
    "SQL = 'TRUNCATE TABLE chunks'\n",
    "SQL = 'UPDATE ONLY documents ' + 'SET url = $2'\n",
    "async def f(conn, rows):\n    await conn.copy_records_to_table('chunks', records=rows)\n",
    "async def f(conn, rows):\n    await conn.copy_records_to_table(table_name='documents', records=rows)\n",
]
JOB_SQL = [
    "SQL = 'SELECT max(completed_at) FROM crawl_jobs WHERE source_id = $1'\n",
    "def f(s):\n    return f'DELETE FROM crawl_jobs WHERE source_id = {s}'\n",
    "from services.jobs import sql as job_sql\n",
    "from services.jobs.sql import LAST_RUN\n",
    "import services.jobs.sql\n",
]


@pytest.mark.parametrize("source", DOCUMENT_WRITES)
def test_planted_document_write_is_caught(source: str) -> None:
    """A write on documents or chunks from a crawl (or a sync, a tool) is refused; in its home it is fine."""
    assert table_owner_problems("services.crawl.x", source), source
    assert not table_owner_problems("services.documents.x", source)


@pytest.mark.parametrize("source", JOB_SQL)
def test_planted_jobs_sql_is_caught(source: str) -> None:
    """SQL on the jobs table (or its statements imported) outside services/jobs/ is refused."""
    assert table_owner_problems("services.crawl.x", source), source
    assert not table_owner_problems("services.jobs.x", source)


def test_table_rule_lets_reads_and_other_tables_be() -> None:
    """Reading documents, writing the frontier, a 'FOR UPDATE' lock and prose are no violation."""
    fine = (
        "A = 'SELECT id FROM documents WHERE id = $1 FOR UPDATE'\n"
        "B = 'UPDATE crawl_frontier SET state = $2 WHERE job_id = $1'\n"
        "C = 'SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id FOR UPDATE OF c SKIP LOCKED'\n"
        "D = 'Documents: update them with manage_document'\n"
    )
    assert not table_owner_problems("services.crawl.x", fine)
