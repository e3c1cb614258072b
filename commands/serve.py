"""`archivist serve`: the MCP server over stdio, or streamable HTTP with the console beside /mcp."""

from __future__ import annotations

import argparse
import asyncio
import errno
import socket
import sys
from typing import TYPE_CHECKING, Any

from commands.lifecycle import serve_http, serve_stdio
from commands.output import fail, usage
from services.core.settings import Settings

if TYPE_CHECKING:
    from server import ArchivistServer
    from services.app import Runtime


def add_serve_command(sub: Any) -> None:
    serve = sub.add_parser(
        "serve",
        help="run the MCP server (stdio by default)",
        description="Run the MCP server: over stdio for one client, or over streamable HTTP (with the web "
        "console at /) for many. SIGINT, SIGTERM or the end of stdin stop it cleanly.",
        epilog="examples:\n  archivist serve\n  archivist serve --http --port 8765\n"
        "  archivist serve --http --host 0.0.0.0 --tls-cert cert.pem --tls-key key.pem",
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
    serve.add_argument("--tls-cert", default=None, metavar="FILE", help="serve HTTPS: certificate (PEM)")
    serve.add_argument("--tls-key", default=None, metavar="FILE", help="serve HTTPS: private key (PEM)")


def refuse_open_public_bind(settings: Settings, host: str) -> None:
    from services.access.hosts import is_loopback
    from services.access.tokens import tokens_exist

    if not is_loopback(host) and not settings.oauth_issuer and not asyncio.run(tokens_exist(settings)):
        fail(
            f"refusing to serve on {host} without access tokens.",
            "Create one first: archivist token create --name NAME [--profile P]",
        )


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP listening socket whose protocol is named (IPPROTO_TCP): asyncio turns Nagle's algorithm off
    only on sockets that say they are TCP, and `socket.create_server` leaves the protocol 0, which cost
    every HTTP reply a 40 ms delayed-ACK wait."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(socket.SOMAXCONN)
    except OSError:
        sock.close()
        raise
    return sock


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything is announced: a port another server holds fails here,
    with what to do, instead of after a ready line that would point at that other server."""
    try:
        return listening_socket(host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            fail(
                f"port {port} on {host} is already in use (another Archivist, or another program).",
                "Stop that server, or pick another port: archivist serve --http --port N (or ARCHIVIST_HTTP_PORT).",
            )
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}.", "Check --host and --port.")


def serve(args: argparse.Namespace, settings: Settings) -> None:
    """Build the server and run it until the client leaves or a stop signal arrives (exit 0)."""
    from server import build_server, env_profiles
    from services.access.profiles import read_profile_notes
    from services.app import Runtime

    profiles = args.profile or env_profiles()
    host, port = args.host or settings.http_host, args.port or settings.http_port
    if args.http:
        settings = settings.for_http()  # file ingestion over HTTP only where ARCHIVIST_ALLOWED_PATHS says
    runtime = Runtime(settings)
    auth, gate = None, None
    if bool(args.tls_cert) != bool(args.tls_key):
        usage("--tls-cert and --tls-key go together", "Give both files, or neither.")
    if args.http:
        from access.http_auth import http_auth

        refuse_open_public_bind(settings, host)
        auth, gate = http_auth(settings, host, port, "https" if args.tls_cert else "http")
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
    serve_console(args, server, runtime, settings, host, port)


def serve_console(
    args: argparse.Namespace, server: ArchivistServer, runtime: Runtime, settings: Settings, host: str, port: int
) -> None:
    """Streamable HTTP at /mcp with the console at /, hardened (access/http_app.py), under uvicorn."""
    from access.http_app import http_app
    from services.access.disclosure import set_remote_errors
    from web import mount_console

    tls = bool(args.tls_cert and args.tls_key)
    mount_console(server, runtime, settings, host, tls=tls)
    set_remote_errors(True)  # error messages leave this process over HTTP: no server paths in them
    app = http_app(server, settings, host, stateless=bool(args.stateless or settings.stateless_http))
    listening = bind(host, port)
    base = f"{'https' if tls else 'http'}://{host}:{port}"
    print(f"Archivist console: {base}/  (MCP: {base}/mcp)", file=sys.stderr)
    asyncio.run(serve_http(app, listening, ssl_certfile=args.tls_cert, ssl_keyfile=args.tls_key))
