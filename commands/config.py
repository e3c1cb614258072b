"""`archivist config CLIENT`: a ready-to-paste MCP client entry, with secrets only as variable references.

For `--http URL` the server is asked whether it needs a token (an unauthenticated `initialize` answered
401 does); the entry carries an `Authorization` header only then, so a client of an open loopback server
is never told to send a variable it does not have.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any
from urllib.parse import urlsplit

from services.settings import Settings

CLIENTS = ["claude-code", "claude-desktop", "cursor", "vscode"]
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def add_config_command(sub: Any) -> None:
    config = sub.add_parser(
        "config",
        help="print an MCP client configuration entry",
        description="Print an MCP client entry: a stdio entry that starts `archivist serve`, or with --http an "
        "entry for a running HTTP server (a bearer-token header only when that server requires one).",
        epilog="examples:\n  archivist config claude-desktop\n  archivist config cursor --http http://127.0.0.1:8765/mcp",
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


def redact_dsn(url: str) -> str:
    """DATABASE_URL with its password replaced by an environment reference (the one redaction)."""
    from services.access.clients import dsn_for_entry

    return dsn_for_entry(url)


def server_requires_token(url: str) -> bool | None:
    """Ask the server: an unauthenticated initialize answered 401 means it wants a token; None when it
    cannot be reached. A session the probe opened is closed again."""
    import httpx

    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "archivist-config"}},
    }
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    try:
        with httpx.Client(timeout=5) as client:
            response = client.post(url, json=body, headers=headers)
            session = response.headers.get("mcp-session-id")
            if session:
                client.delete(url, headers={"mcp-session-id": session})
    except httpx.HTTPError:
        return None
    return response.status_code == 401


def wants_token_header(url: str, choice: bool | None) -> bool:
    if choice is not None:
        return choice
    required = server_requires_token(url)
    if required is None:
        required = urlsplit(url).hostname not in LOOPBACK  # off loopback, a server always requires tokens
        state = "needs" if required else "does not need"
        print(f"note: could not reach {url}; assuming it {state} a token (see --token-header).", file=sys.stderr)
    if not required:
        print(
            "note: this server accepts clients without a token. If you create one later "
            "(archivist token create --name NAME), add the header with: "
            f"archivist config CLIENT --http {url} --token-header",
            file=sys.stderr,
        )
    return required


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


def stdio_client_entry(client: str, settings: Settings, profiles: list[str] | None) -> dict[str, Any]:
    from services.access.clients import client_env, server_command

    command, *args = server_command()
    env = client_env(settings)
    if "DATABASE_URL" in env:
        env["DATABASE_URL"] = redact_dsn(env["DATABASE_URL"])
    if profiles:
        env["ARCHIVIST_PROFILES"] = ",".join(profiles)
    entry: dict[str, Any] = {"command": command, "args": args, "env": env}
    if client == "claude-code":
        entry = {"type": "stdio", **entry}
    if client == "vscode":
        return {"servers": {"archivist": {"type": "stdio", **entry}}}
    return {"mcpServers": {"archivist": entry}}


def print_client_config(args: argparse.Namespace, settings: Settings) -> None:
    if args.http:
        entry = http_entry(args.client, args.http, wants_token_header(args.http, args.token_header))
    else:
        entry = stdio_client_entry(args.client, settings, args.profile)
    print(json.dumps(entry, indent=2))
