"""Two doors out of the server, read from the source with `ast` (issue 27, points 3 and 4):

- every outbound connection to a host a caller chose goes through the one connector
  (services/net/connector.py: resolve once, check, connect to the checked address). No other module
  imports an HTTP or socket client library or builds a client, except the few that reach endpoints
  the operator configured, each named below with its reason;
- every secret sent to a site passes the one gate (services/access/secret_gate.py): no other module
  reads an environment variable whose name is decided at run time, or the whole environment.

A new source type that fetches on its own, or reads `os.environ[name]` for a caller's `env:NAME`, fails
here before it can reopen a hole the gate and the connector closed.
"""

from __future__ import annotations

import ast

from tests.architecture_rules import module_files

CONNECTOR = "services.net.connector"
GATE = "services.access.secret_gate"
#: client libraries that open connections: only the connector imports them
NETWORK_LIBRARIES = ("urllib3", "requests", "aiohttp", "urllib.request", "http.client", "httpcore", "pycurl")
#: calls that build a client or open a connection
NETWORK_CALLS = frozenset(
    {f"httpx.{name}" for name in ("AsyncClient", "Client", "AsyncHTTPTransport", "HTTPTransport")}
    | {f"httpx.{verb}" for verb in ("get", "post", "put", "patch", "delete", "head", "options", "request", "stream")}
    | {"socket.create_connection", "socket.socket", "asyncio.open_connection", "anyio.connect_tcp"}
)
#: dulwich's ways to a remote (a client resolves and connects on its own unless given the connector's pool)
DULWICH_CLIENTS = frozenset(
    {
        "get_transport_and_path",
        "get_transport_and_path_from_url",
        "HttpGitClient",
        "Urllib3HttpGitClient",
        "default_urllib3_manager",
        "TCPGitClient",
        "SSHGitClient",
    }
)
#: (module, what it uses) -> why that is no caller-chosen outbound connection outside the connector
ALLOWED = {
    ("services.search.web", "httpx.AsyncClient"): "SearXNG: an endpoint the operator configures",
    ("services.access.oauth", "httpx.AsyncClient"): "the identity provider the operator configures",
    ("commands.config", "httpx.Client"): "the command line probing the server URL its own user typed",
    ("services.fetchers.browser", "socket.socket"): "binds a free local port for Chromium's DevTools",
    ("commands.serve", "socket.socket"): "the HTTP server's own listening socket: it binds, never connects",
    ("services.sync.git.remote", "dulwich.client.Urllib3HttpGitClient"): (
        "subclassed as BoundedGitClient, which refuses any pool manager but the connector's "
        "(tests/security/test_ssrf_git.py::test_the_git_client_connects_only_through_the_connector)"
    ),
}


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def network_uses(tree: ast.AST) -> set[str]:
    """What a module uses to reach the network: imported client libraries, dulwich clients, client calls."""
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
            if base == "dulwich.client":
                used.update(f"dulwich.client.{a.name}" for a in node.names if a.name in DULWICH_CLIENTS)
            if base == "httpx":
                used.update(f"httpx.{a.name}" for a in node.names if f"httpx.{a.name}" in NETWORK_CALLS)
        elif isinstance(node, ast.Call):
            name = dotted(node.func)
            if name in NETWORK_CALLS:
                used.add(name)
            continue
        else:
            continue
        used.update(n for n in names if any(n == lib or n.startswith(lib + ".") for lib in NETWORK_LIBRARIES))
        used.update(n for n in names if n.startswith("dulwich.client.") and n.split(".")[-1] in DULWICH_CLIENTS)
    return used


def test_only_the_connector_opens_outbound_connections() -> None:
    wrong = []
    for module, path in module_files().items():
        if module == CONNECTOR:
            continue
        for use in sorted(network_uses(ast.parse(path.read_text(), str(path)))):
            if (module, use) not in ALLOWED:
                wrong.append(f"{module} uses {use}: connect through {CONNECTOR} (pinned_client, PinnedPoolManager)")
    assert not wrong, "\n".join(wrong)


def test_the_allow_list_names_only_what_is_still_there() -> None:
    """An allowance no longer needed is dropped, so the list stays the list of exceptions that exist."""
    files = module_files()
    stale = [
        f"{module}: {use}"
        for module, use in ALLOWED
        if use not in network_uses(ast.parse(files[module].read_text(), str(files[module])))
    ]
    assert not stale, stale


def constant_key(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def environment_reads(tree: ast.AST) -> list[str]:
    """Reads of a variable named at run time, or of the whole environment (writes are fine)."""
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [f"from os import {a.name}" for a in node.names if a.name in ("environ", "environb", "getenv")]
        name = dotted(node) if isinstance(node, ast.Attribute) else None
        if name in ("os.getenv", "os.getenvb"):
            call = parents.get(node)
            if not (isinstance(call, ast.Call) and call.func is node and call.args and constant_key(call.args[0])):
                found.append(f"line {node.lineno}: {name} of a name decided at run time")
        if name not in ("os.environ", "os.environb"):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.Subscript) and parent.value is node:
            if isinstance(parent.ctx, ast.Store) or constant_key(parent.slice):
                continue
        if isinstance(parent, ast.Attribute) and parent.attr in ("get", "pop", "setdefault"):
            call = parents.get(parent)
            if isinstance(call, ast.Call) and call.args and constant_key(call.args[0]):
                continue
        found.append(f"line {node.lineno}: {ast.unparse(parent or node)[:80]}")
    return found


def test_only_the_secret_gate_reads_a_variable_a_caller_named() -> None:
    wrong = []
    for module, path in module_files().items():
        if module == GATE:
            continue
        wrong += [f"{module} {read}" for read in environment_reads(ast.parse(path.read_text(), str(path)))]
    assert not wrong, "read caller-named variables only through secret_gate.secret_value:\n" + "\n".join(wrong)


def test_the_checks_catch_what_they_are_for() -> None:
    """The two readers, on code that would reopen each hole."""
    leaky = ast.parse(
        "import os\nimport httpx\nfrom dulwich.client import get_transport_and_path\n"
        "def read(name):\n    return os.environ.get(name, '')\n"
        "def all_of_it():\n    return dict(os.environ)\n"
        "async def fetch(url):\n    async with httpx.AsyncClient() as c:\n        return await c.get(url)\n"
        "def ok():\n    os.environ['X'] = '1'\n    return os.environ.get('HOME'), os.getenv('PATH')\n"
    )
    assert network_uses(leaky) == {"httpx.AsyncClient", "dulwich.client.get_transport_and_path"}
    reads = sorted(environment_reads(leaky))
    assert reads == ["line 5: os.environ.get", "line 7: dict(os.environ)"], reads


def test_every_module_is_read() -> None:
    """The readers see services, tools, web, access, commands and the entry points."""
    modules = module_files()
    assert {CONNECTOR, GATE, "services.sync.git.remote", "server", "cli"} <= set(modules)
