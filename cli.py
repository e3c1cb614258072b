"""The `archivist` command line: parse the arguments and dispatch to `commands/` (or serve MCP)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys

from services.settings import Settings, get_settings

logger = logging.getLogger("archivist")


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    from services.access.disclosure import install_log_redaction

    install_log_redaction()


def print_client_config(
    client: str, settings: Settings, http_url: str | None = None, profiles: list[str] | None = None
) -> None:
    """Print a client entry; secrets appear only as environment-variable references."""
    from commands.access import http_entry, redact_dsn
    from services.access.clients import client_env, server_command

    if http_url:
        print(json.dumps(http_entry(client, http_url), indent=2))
        return
    command, *args = server_command()
    env = client_env(settings)
    if "DATABASE_URL" in env:
        env["DATABASE_URL"] = redact_dsn(env["DATABASE_URL"])
    if profiles:
        env["ARCHIVIST_PROFILES"] = ",".join(profiles)
    entry = {"command": command, "args": args, "env": env}
    if client == "claude-code":
        entry = {"type": "stdio", **entry}
    if client == "vscode":
        print(json.dumps({"servers": {"archivist": {"type": "stdio", **entry}}}, indent=2))
        return
    print(json.dumps({"mcpServers": {"archivist": entry}}, indent=2))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="archivist", description="Archivist knowledge base for AI agents")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the MCP server (stdio by default)")
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp instead of stdio")
    serve.add_argument("--host", default=None)
    serve.add_argument("--port", type=int, default=None)
    serve.add_argument("--no-worker", action="store_true", help="leave crawl jobs to `archivist worker`")
    serve.add_argument("--watch", action="store_true", help="keep folder sources in sync as their files change")
    serve.add_argument("--profile", action="append", default=None, help="confine to this profile (repeatable)")
    serve.add_argument("--stateless", action="store_true", help="HTTP without sessions (behind a load balancer)")
    serve.add_argument("--tls-cert", default=None, metavar="FILE", help="serve HTTPS: certificate (PEM)")
    serve.add_argument("--tls-key", default=None, metavar="FILE", help="serve HTTPS: private key (PEM)")
    config = sub.add_parser("config", help="print an MCP client configuration entry")
    config.add_argument("client", choices=["claude-code", "claude-desktop", "cursor", "vscode"])
    config.add_argument("--http", default=None, metavar="URL", help="entry for a running HTTP server (bearer token)")
    config.add_argument("--profile", action="append", default=None, help="confine the stdio server (repeatable)")
    from commands.access import add_access_commands
    from commands.kb import add_human_commands

    add_human_commands(sub)
    sub.add_parser("doctor", help="report database, models, worker and queue health")
    add_access_commands(sub)
    return parser


def serve(args: argparse.Namespace, settings: Settings) -> None:
    """`archivist serve`: stdio, or streamable HTTP with the console beside /mcp."""
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
        raise SystemExit("error: --tls-cert and --tls-key go together")
    if args.http:
        from access.http_auth import http_auth, is_loopback, tokens_exist

        if not is_loopback(host) and not asyncio.run(tokens_exist(settings)):
            print(
                f"error: refusing to serve on {host} without access tokens.\n"
                "Create one first: archivist token create --name NAME [--profile P]",
                file=sys.stderr,
            )
            raise SystemExit(2)
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
    if args.http:
        from access.http_app import serve_http
        from web import mount_console

        tls = bool(args.tls_cert and args.tls_key)
        mount_console(server, runtime, settings, host, tls=tls)
        base = f"{'https' if tls else 'http'}://{host}:{port}"
        print(f"Archivist console: {base}/  (MCP: {base}/mcp)", file=sys.stderr)
        stateless = bool(args.stateless or settings.stateless_http)
        serve_http(server, settings, host, port, stateless=stateless, tls_cert=args.tls_cert, tls_key=args.tls_key)
    else:
        server.run("stdio")


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    settings = get_settings()
    configure_logging(settings.log_level)
    if args.command == "serve":
        serve(args, settings)
    elif args.command == "config":
        print_client_config(args.client, settings, http_url=args.http, profiles=args.profile)
    else:
        from commands.kb import run_human_command
        from services.access.scope import Scope, use_scope

        with use_scope(Scope.owner()):  # the command line is the local owner, said out loud
            asyncio.run(run_human_command(args, settings))


if __name__ == "__main__":
    main()
