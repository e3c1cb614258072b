"""`archivist config CLIENT`: a ready-to-paste MCP client entry, with secrets only as variable references.

For `--http URL` the server is asked whether it needs a token (an unauthenticated `initialize` answered
401 does); the entry carries an `Authorization` header only then, so a client of an open loopback server
is never told to send a variable it does not have.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from commands.output import fail, note
from services.access.hosts import is_loopback
from services.core.settings import Settings

CLIENTS = ["claude-code", "claude-desktop", "cursor", "vscode"]


def add_config_command(sub: Any) -> None:
    config = sub.add_parser(
        "config",
        help="print an MCP client configuration entry",
        description="Print an MCP client entry: a stdio entry that starts `archivist serve`, or with --http an "
        "entry for a running HTTP server (a bearer-token header only when that server requires one).",
        epilog="examples:\n  archivist config claude-desktop --allow ~/notes\n"
        "  archivist config claude-code --uvx git+https://github.com/OWNER/archivist\n"
        "  archivist config cursor --http http://127.0.0.1:8765/mcp",
    )
    config.add_argument("client", choices=CLIENTS, help="the MCP client to configure")
    config.add_argument("--http", default=None, metavar="URL", help="entry for a running HTTP server at URL")
    config.add_argument(
        "--token-header",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="with --http: include the bearer-token header or not (default: ask the server)",
    )
    config.add_argument(
        "--profile", action="append", default=None, metavar="NAME", help="confine the stdio server (repeatable)"
    )
    config.add_argument(
        "--allow", action="append", default=None, metavar="DIR", help="a directory agents may ingest (repeatable)"
    )
    launch = config.add_mutually_exclusive_group()
    launch.add_argument(
        "--uvx", default=None, metavar="SPEC", help="start the server with `uvx --from SPEC` (a git URL, wheel or name)"
    )
    launch.add_argument("--pipx", default=None, metavar="SPEC", help="start the server with `pipx run --spec SPEC`")


def redact_dsn(url: str) -> str:
    """DATABASE_URL with its password replaced by an environment reference (the one redaction)."""
    from services.access.clients import dsn_for_entry

    return dsn_for_entry(url)


def probe(url: str) -> str:
    """Ask the server with an unauthenticated initialize: "open" (an MCP endpoint that answered),
    "token" (401 with a Bearer challenge: it wants a token), "unreachable", or "not-mcp" (something
    answered, but not MCP). A session the probe opened is closed again."""
    import httpx

    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "archivist-config", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    try:
        with httpx.Client(timeout=5) as client:
            response = client.post(url, json=body, headers=headers)
            session = response.headers.get("mcp-session-id")
            if session:
                client.delete(url, headers={"mcp-session-id": session})
    except httpx.HTTPError:
        return "unreachable"
    if response.status_code == 401 and response.headers.get("www-authenticate", "").lower().startswith("bearer"):
        return "token"
    if response.status_code == 200 and '"jsonrpc"' in response.text:  # a JSON-RPC answer: MCP
        return "open"
    return f"not-mcp (HTTP {response.status_code})"


def mcp_url_hint(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/mcp"


def wants_token_header(url: str, choice: bool | None) -> bool:
    """Whether the entry carries the token header: the caller's choice, else what the server says.
    A URL that answers but is not an MCP endpoint stops here (exit 1)."""
    answer = probe(url)
    if answer.startswith("not-mcp"):
        fail(
            f"{url} answered, but not as an MCP endpoint ({answer.removeprefix('not-mcp ').strip('()')}).",
            f"Archivist serves MCP at /mcp: archivist config CLIENT --http {mcp_url_hint(url)}",
            code=1,
        )
    if choice is not None:
        return choice
    if answer == "unreachable":
        required = not is_loopback(urlsplit(url).hostname or "")  # off loopback, a server always requires tokens
        state = "with" if required else "without"
        note(
            f"note: could not reach {url}: printed {state} a token header, as a server there "
            f"{'off loopback always needs one' if required else 'on loopback needs none until a token exists'}. "
            "Start the server and run this again, or choose with --token-header / --no-token-header."
        )
        return required
    if answer == "open":
        note(
            "note: this server accepts clients without a token. If you create one later "
            "(archivist token create --name NAME), add the header with: "
            f"archivist config CLIENT --http {url} --token-header"
        )
    return answer == "token"


def http_entry(client: str, url: str, with_token: bool = True) -> dict[str, Any]:
    """An HTTP entry; its bearer token (when asked for) is an environment-variable reference, never the secret."""
    if client == "vscode":
        server: dict[str, Any] = {"type": "http", "url": url}
        entry: dict[str, Any] = {"servers": {"archivist": server}}
        if with_token:
            server["headers"] = {"Authorization": "Bearer ${input:archivist-token}"}
            entry["inputs"] = [
                {"type": "promptString", "id": "archivist-token", "description": "Archivist token", "password": True}
            ]
        return entry
    auth = {"Authorization": "Bearer ${ARCHIVIST_TOKEN}"}
    if client == "claude-desktop":  # Claude Desktop speaks stdio only: bridge with mcp-remote
        bridge: dict[str, Any] = {"command": "npx", "args": ["mcp-remote", url]}
        if with_token:
            bridge["args"] += ["--header", "Authorization:${AUTH_HEADER}"]
            bridge["env"] = {"AUTH_HEADER": "Bearer ${ARCHIVIST_TOKEN}"}
        return {"mcpServers": {"archivist": bridge}}
    plain: dict[str, Any] = {"url": url} if client == "cursor" else {"type": "http", "url": url}
    if with_token:
        plain["headers"] = auth
    return {"mcpServers": {"archivist": plain}}


LOCAL_SUFFIXES = (".whl", ".tar.gz", ".zip")


def launcher(args: argparse.Namespace) -> list[str]:
    """The command that starts `archivist serve`: this installation's absolute path, or uvx/pipx
    building an isolated environment from a package spec (a git URL, a wheel, a PyPI name)."""
    from services.access.clients import server_command

    if args.uvx:
        return ["uvx", "--from", package_spec(args.uvx), "archivist", "serve"]
    if args.pipx:
        return ["pipx", "run", "--spec", package_spec(args.pipx), "archivist", "serve"]
    return server_command()


def package_spec(spec: str) -> str:
    """A local wheel, archive or folder as an absolute path (a client starts the server from its own
    folder, where a relative one means nothing); a URL or a package name unchanged."""
    local = Path(spec).expanduser()
    if "://" in spec or not (local.exists() or spec.startswith((".", "/", "~")) or spec.endswith(LOCAL_SUFFIXES)):
        return spec
    return str(local.resolve())


def stdio_client_entry(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    from services.access.clients import client_env

    client, profiles = args.client, args.profile
    command, *rest = launcher(args)
    if args.allow:
        settings = settings.model_copy(update={"allowed_paths": [Path(p).expanduser().resolve() for p in args.allow]})
    env = client_env(settings)
    if "ARCHIVIST_ALLOWED_PATHS" not in env:
        note(
            "note: ARCHIVIST_ALLOWED_PATHS is not set: the server will read files only under the directory the client "
            "starts it in. Name the directories agents may ingest with --allow DIR (repeatable)."
        )
    if "DATABASE_URL" in env:
        env["DATABASE_URL"] = redact_dsn(env["DATABASE_URL"])
    if profiles:
        env["ARCHIVIST_PROFILES"] = ",".join(profiles)
    entry: dict[str, Any] = {"command": command, "args": rest, "env": env}
    if client == "claude-code":
        entry = {"type": "stdio", **entry}
    if client == "vscode":
        return {"servers": {"archivist": {"type": "stdio", **entry}}}
    return {"mcpServers": {"archivist": entry}}


def print_client_config(args: argparse.Namespace, settings: Settings) -> None:
    if args.http:
        entry = http_entry(args.client, args.http, wants_token_header(args.http, args.token_header))
    else:
        entry = stdio_client_entry(args, settings)
    print(json.dumps(entry, indent=2))
