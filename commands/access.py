"""`archivist profile|token|audit ...` and secret-free client configs."""

from __future__ import annotations

import argparse
import re
from datetime import timedelta
from typing import Any

UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    m = re.fullmatch(r"(\d+)\s*([smhdw])", text.strip())
    if not m:
        raise SystemExit(f"error: bad duration {text!r}; use e.g. 30d, 12h, 15m")
    return timedelta(**{UNITS[m.group(2)]: int(m.group(1))})


def parse_rate(text: str) -> int:
    m = re.fullmatch(r"(\d+)(?:/min)?", text.strip())
    if not m:
        raise SystemExit(f"error: bad rate {text!r}; use e.g. 120/min")
    return int(m.group(1))


def add_access_commands(sub: Any) -> None:
    profile = sub.add_parser("profile", help="manage search profiles").add_subparsers(dest="op", required=True)
    for op in ("create", "update"):
        p = profile.add_parser(op)
        p.add_argument("name")
        p.add_argument("--description", default=None)
        p.add_argument("--source", action="append", default=None, help="source id (repeatable, in order)")
        p.add_argument("--search-type", choices=["vector", "hybrid", "rerank"], default=None)
        p.add_argument("--match-count", type=int, default=None)
        p.add_argument("--threshold", type=float, default=None)
        p.add_argument("--keyword-weight", type=float, default=None)
        p.add_argument("--read-only", action=argparse.BooleanOptionalAction, default=None)
        p.add_argument("--enabled", action=argparse.BooleanOptionalAction, default=None)
    profile.add_parser("list")
    profile.add_parser("show").add_argument("name")
    profile.add_parser("delete").add_argument("name")
    token = sub.add_parser("token", help="manage HTTP access tokens").add_subparsers(dest="op", required=True)
    create = token.add_parser("create")
    create.add_argument("--name", required=True)
    create.add_argument("--profile", action="append", default=[])
    create.add_argument("--read-only", action="store_true")
    create.add_argument("--expires", default=None, help="e.g. 30d")
    create.add_argument("--rate", default=None, help="e.g. 120/min")
    create.add_argument("--max-jobs", type=int, default=None, help="crawl/sync jobs running at once")
    token.add_parser("list")
    token.add_parser("revoke").add_argument("token", help="name or id")
    audit = sub.add_parser("audit", help="show the audit log of tool calls")
    audit.add_argument("--since", default="1h")
    audit.add_argument("--tool", default=None)
    audit.add_argument("--token", default=None)
    audit.add_argument("--errors", action="store_true")
    audit.add_argument("--page", type=int, default=1)
    audit.add_argument("--prune", action="store_true", help="delete entries past the retention setting")


def _profile_fields(args: argparse.Namespace) -> dict[str, Any]:
    fields = {
        "description": args.description,
        "source_ids": args.source,
        "search_type": args.search_type,
        "match_count": args.match_count,
        "similarity_threshold": args.threshold,
        "keyword_weight": args.keyword_weight,
        "read_only": args.read_only,
        "enabled": args.enabled,
    }
    return {k: v for k, v in fields.items() if v is not None}


def _show_profile(p: Any) -> None:
    flags = ("read-only " if p.read_only else "") + ("" if p.enabled else "disabled")
    print(f"{p.name}  {flags}\n  {p.description}\n  sources: {', '.join(map(str, p.source_ids)) or '-'}")
    print(f"  defaults: type={p.search_type} k={p.match_count} threshold={p.similarity_threshold}")


async def cli_profile(app: Any, args: argparse.Namespace) -> None:
    if args.op == "create":
        _show_profile(await app.profiles.create(args.name, **_profile_fields(args)))
    elif args.op == "update":
        _show_profile(await app.profiles.update(args.name, **_profile_fields(args)))
    elif args.op == "show":
        _show_profile(await app.profiles.get(args.name))
    elif args.op == "delete":
        await app.profiles.delete(args.name)
        print(f"deleted profile {args.name}")
    else:
        for p in await app.profiles.list():
            _show_profile(p)


async def cli_token(app: Any, args: argparse.Namespace) -> None:
    if args.op == "create":
        token, secret = await app.tokens.create(
            args.name,
            args.profile,
            read_only=args.read_only,
            expires_in=parse_duration(args.expires) if args.expires else None,
            rate_per_minute=parse_rate(args.rate) if args.rate else None,
            max_running_jobs=args.max_jobs,
        )
        print(f"token {token.name} ({token.id}) created; the secret is shown once:\n{secret}")
        print("Give it to the client as an environment variable, e.g. export ARCHIVIST_TOKEN=<secret>")
    elif args.op == "revoke":
        token = await app.tokens.revoke(args.token)
        print(f"revoked {token.name} at {token.revoked_at}")
    else:
        for t in await app.tokens.list():
            state = "revoked" if t.revoked_at else ("active" if t.active else "expired")
            limits = f" rate={t.rate_per_minute or '-'} jobs={t.max_running_jobs or '-'}"
            print(f"{t.name:20} {t.prefix}…  {state:8} profiles={','.join(t.profiles) or '*'} ro={t.read_only}{limits}")


async def cli_audit(app: Any, args: argparse.Namespace) -> None:
    if args.prune:
        n = await app.audit.prune(timedelta(days=app.settings.audit_retention_days))
        print(f"pruned {n} entries")
        return
    page = await app.audit.query(parse_duration(args.since), args.tool, args.token, args.errors, args.page, 20)
    print(f"{'time':19}  {'who':12} {'tool':22} {'action':8} {'outcome':18} {'ms':>8} {'bytes':>7}")
    for e in page.items:
        outcome = e.error_code or "ok"
        print(
            f"{e.at:%Y-%m-%d %H:%M:%S}  {e.who[:12]:12} {e.tool[:22]:22} {(e.action or '-')[:8]:8} "
            f"{outcome[:18]:18} {e.latency_ms:8.1f} {e.response_bytes:7}"
        )
    print(f"({page.total_count} entries; page {page.page})")


def redact_dsn(url: str) -> str:
    """DATABASE_URL with its password replaced by an environment reference (the one redaction)."""
    from services.access.clients import dsn_for_entry

    return dsn_for_entry(url)


def http_entry(client: str, url: str) -> dict[str, Any]:
    """An HTTP entry whose bearer token is an environment-variable reference, never the secret."""
    if client == "vscode":
        return {
            "servers": {
                "archivist": {
                    "type": "http",
                    "url": url,
                    "headers": {"Authorization": "Bearer ${input:archivist-token}"},
                }
            },
            "inputs": [
                {"type": "promptString", "id": "archivist-token", "description": "Archivist token", "password": True}
            ],
        }
    auth = {"Authorization": "Bearer ${ARCHIVIST_TOKEN}"}
    if client == "claude-desktop":  # Claude Desktop speaks stdio only: bridge with mcp-remote
        entry = {
            "command": "npx",
            "args": ["mcp-remote", url, "--header", "Authorization:${AUTH_HEADER}"],
            "env": {"AUTH_HEADER": "Bearer ${ARCHIVIST_TOKEN}"},
        }
        return {"mcpServers": {"archivist": entry}}
    entry = {"type": "http", "url": url, "headers": auth}
    if client == "cursor":
        entry = {"url": url, "headers": auth}
    return {"mcpServers": {"archivist": entry}}
