"""`archivist serve`: the MCP server over stdio, or streamable HTTP with the console beside /mcp."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from commands.lifecycle import serve_http, serve_stdio
from services.settings import Settings


def add_serve_command(sub: Any) -> None:
    serve = sub.add_parser(
        "serve",
        help="run the MCP server (stdio by default)",
        description="Run the MCP server: over stdio for one client, or over streamable HTTP (with the web "
        "console at /) for many. SIGINT, SIGTERM or the end of stdin stop it cleanly.",
        epilog="examples:\n  archivist serve\n  archivist serve --http --port 8765",
    )
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp instead of stdio")
    serve.add_argument("--host", default=None, help="HTTP address to bind (default: ARCHIVIST_HTTP_HOST, 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="HTTP port (default: ARCHIVIST_HTTP_PORT, 8765)")
    serve.add_argument("--no-worker", action="store_true", help="leave crawl jobs to `archivist worker`")
    serve.add_argument("--watch", action="store_true", help="keep folder sources in sync as their files change")
    serve.add_argument(
        "--profile", action="append", default=None, metavar="NAME", help="confine to this profile (repeatable)"
    )
    serve.add_argument("--stateless", action="store_true", help="HTTP without sessions (behind a load balancer)")


def refuse_open_public_bind(settings: Settings, host: str) -> None:
    from access.http_auth import is_loopback, tokens_exist

    if not is_loopback(host) and not asyncio.run(tokens_exist(settings)):
        print(
            f"error: refusing to serve on {host} without access tokens.\n"
            "Create one first: archivist token create --name NAME [--profile P]",
            file=sys.stderr,
        )
        raise SystemExit(2)


def serve(args: argparse.Namespace, settings: Settings) -> None:
    """Build the server and run it until the client leaves or a stop signal arrives (exit 0)."""
    from server import build_server, env_profiles
    from services.access.profiles import read_profile_notes
    from services.app import Runtime

    profiles = args.profile or env_profiles()
    host, port = args.host or settings.http_host, args.port or settings.http_port
    runtime = Runtime(settings)
    auth, gate = None, None
    if args.http:
        from access.http_auth import http_auth

        refuse_open_public_bind(settings, host)
        auth, gate = http_auth(settings, host, port)
    server = build_server(
        settings,
        run_worker=False if args.no_worker else None,
        runtime=runtime,
        watch=True if args.watch else None,
        profiles=profiles,
        auth=auth,
        auth_gate=gate,
        profile_notes=asyncio.run(read_profile_notes(settings, profiles)),
    )
    if not args.http:
        asyncio.run(serve_stdio(server))
        return
    from web import mount_console

    mount_console(server, runtime, settings, host)
    stateless = bool(args.stateless or settings.stateless_http)
    app = server.streamable_http_app(streamable_http_path="/mcp", stateless_http=stateless, host=host)
    print(f"Archivist console: http://{host}:{port}/  (MCP: http://{host}:{port}/mcp)", file=sys.stderr)
    asyncio.run(serve_http(app, host, port))
