"""`archivist profile|token|audit ...`: profiles, HTTP access tokens and the audit log."""

from __future__ import annotations

import argparse
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commands.output import note, print_json, print_table, say, usage, when
from models import SEARCH_TYPES
from services.core.settings import get_settings

if TYPE_CHECKING:
    from services.app import Archivist

UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    m = re.fullmatch(r"(\d+)\s*([smhdw])", text.strip())
    if not m:
        usage(f"bad duration {text!r}", "Use a number and a unit, e.g. 30d, 12h, 15m.")
    return timedelta(**{UNITS[m.group(2)]: int(m.group(1))})


def parse_rate(text: str) -> int:
    m = re.fullmatch(r"(\d+)(?:/min)?", text.strip())
    if not m:
        usage(f"bad rate {text!r}", "Use calls per minute, e.g. 120/min.")
    return int(m.group(1))


def add_access_commands(sub: Any) -> None:
    add_profile_commands(sub)
    add_token_commands(sub)
    audit = sub.add_parser(
        "audit",
        help="show the audit log of tool calls",
        description="Show the audit log of MCP tool calls, newest first (20 a page).",
        epilog="examples:\n  archivist audit --since 24h --errors\n  archivist audit --tool search_knowledge_base\n"
        "  archivist audit --stats --since 7d",
    )
    audit.add_argument(
        "--since", default="1h", metavar="DURATION", help="how far back, e.g. 15m, 12h, 7d (default: 1h)"
    )
    audit.add_argument("--tool", default=None, help="only calls of this tool")
    audit.add_argument(
        "--token", default=None, metavar="NAME", help="only calls made with this token (or oidc:EMAIL of a person)"
    )
    audit.add_argument("--errors", action="store_true", help="only calls that failed")
    audit.add_argument("--page", type=int, default=1, metavar="N", help="page number (default: 1)")
    audit.add_argument("--prune", action="store_true", help="delete entries past the retention setting")
    audit.add_argument(
        "--stats",
        action="store_true",
        help="calls per profile and tool with p50/p95 latency, and the most frequent queries",
    )
    audit.add_argument("--json", action="store_true", help="print JSON for scripts")


def add_profile_commands(sub: Any) -> None:
    profile = sub.add_parser(
        "profile",
        help="manage search profiles",
        description="Profiles confine searches to an ordered list of sources, with their own defaults.",
        epilog="examples:\n  archivist profile create docs --source Python --source Django --read-only\n"
        "  archivist profile list --json",
    ).add_subparsers(dest="op", required=True, metavar="{create,update,list,show,delete,grant,revoke,grants}")
    for op, text in (("create", "create a profile"), ("update", "change a profile")):
        p = profile.add_parser(op, help=text, description=text.capitalize() + ".")
        p.add_argument("name", help="profile name")
        p.add_argument("--description", default=None, help="what the profile is for (shown to agents)")
        p.add_argument(
            "--source", action="append", default=None, help="source title or id (repeatable, in search order)"
        )
        p.add_argument("--search-type", choices=SEARCH_TYPES, default=None, help="default method")
        p.add_argument("--match-count", type=int, default=None, metavar="K", help="default number of results")
        p.add_argument("--threshold", type=float, default=None, help="default similarity threshold (0-1)")
        p.add_argument("--keyword-weight", type=float, default=None, help="default keyword weight of hybrid (0-1)")
        p.add_argument(
            "--read-only", action=argparse.BooleanOptionalAction, default=None, help="forbid writes through it"
        )
        p.add_argument("--enabled", action=argparse.BooleanOptionalAction, default=None, help="switch it on or off")
        p.add_argument(
            "--exclude-flagged",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="leave chunks with injection flags (and unscanned ones) out of its searches",
        )
        p.add_argument(
            "--snippet-chars",
            type=int,
            default=None,
            metavar="N",
            help="cut each hit's text at N characters (50-1000; 0: the default, 1000)",
        )
        p.add_argument(
            "--hit-fields",
            default=None,
            metavar="LIST",
            help="the fields each hit carries besides chunk_id, document_id, text, truncated and flags, "
            "comma-separated (e.g. document_title,metadata,heading_path); 'default' for the defaults, "
            "'all' for every field",
        )
        paths = p.add_mutually_exclusive_group()
        paths.add_argument(
            "--allowed-path",
            action="append",
            default=None,
            metavar="DIR",
            help="a directory its callers may read files under, inside ARCHIVIST_ALLOWED_PATHS (repeatable; "
            "without any, a caller confined to profiles reads no files)",
        )
        paths.add_argument("--no-allowed-paths", action="store_true", help="clear its allowed paths (no files)")
    listing = profile.add_parser("list", help="list profiles", description="List profiles.")
    listing.add_argument("--json", action="store_true", help="print JSON for scripts")
    show = profile.add_parser("show", help="show one profile", description="Show one profile.")
    show.add_argument("name", help="profile name")
    show.add_argument("--json", action="store_true", help="print JSON for scripts")
    profile.add_parser("delete", help="delete a profile", description="Delete a profile.").add_argument(
        "name", help="profile name"
    )
    add_grant_commands(profile)


def add_grant_commands(profile: Any) -> None:
    """`profile grant|revoke NAME --group G --subject S --email-domain D [--write]`, `profile grants`:
    which tokens of ARCHIVIST_OAUTH_ISSUER reach a profile (docs/identity.md)."""
    for op in ("grant", "revoke"):
        text = f"{op} a profile to identity-provider tokens by claim"
        g = profile.add_parser(op, help=text, description=text.capitalize() + " (docs/identity.md).")
        g.add_argument("name", help="profile name")
        g.add_argument("--group", action="append", default=[], help="a value of the groups claim (repeatable)")
        g.add_argument("--subject", action="append", default=[], help="a token subject, `sub` (repeatable)")
        g.add_argument("--email-domain", action="append", default=[], help="a verified email's domain (repeatable)")
        if op == "grant":
            g.add_argument("--write", action="store_true", help="tokens matching this grant may write")
    grants = profile.add_parser("grants", help="list grants", description="List the grants of one or all profiles.")
    grants.add_argument("name", nargs="?", default=None, help="profile name (default: all)")
    grants.add_argument("--json", action="store_true", help="print JSON for scripts")


def add_token_commands(sub: Any) -> None:
    token = sub.add_parser(
        "token",
        help="manage HTTP access tokens",
        description="Bearer tokens for `archivist serve --http`; once one exists, every HTTP client needs one.",
        epilog="examples:\n  archivist token create --name laptop --profile docs --expires 30d\n  archivist token list",
    ).add_subparsers(dest="op", required=True, metavar="{create,list,revoke}")
    create = token.add_parser("create", help="create a token (its secret is shown once)", description="Create a token.")
    create.add_argument("--name", required=True, help="a name to recognise the token by")
    create.add_argument("--profile", action="append", default=[], metavar="NAME", help="confine it to a profile")
    create.add_argument("--read-only", action="store_true", help="searches and reads only")
    create.add_argument("--expires", default=None, metavar="DURATION", help="lifetime, e.g. 30d (default: never)")
    create.add_argument("--rate", default=None, help="call rate limit, e.g. 120/min")
    create.add_argument("--max-jobs", type=int, default=None, metavar="N", help="crawl/sync jobs running at once")
    listing = token.add_parser("list", help="list tokens", description="List tokens (never their secrets).")
    listing.add_argument("--json", action="store_true", help="print JSON for scripts")
    token.add_parser("revoke", help="revoke a token", description="Revoke a token.").add_argument(
        "token", help="name or id"
    )


async def profile_fields(app: Archivist, args: argparse.Namespace) -> dict[str, Any]:
    sources = [(await app.sources.resolve(s)).id for s in args.source] if args.source is not None else None
    fields = {
        "description": args.description,
        "source_ids": sources,
        "search_type": args.search_type,
        "match_count": args.match_count,
        "similarity_threshold": args.threshold,
        "keyword_weight": args.keyword_weight,
        "read_only": args.read_only,
        "enabled": args.enabled,
        "exclude_flagged": args.exclude_flagged,
        "allowed_paths": [os.path.abspath(os.path.expanduser(d)) for d in args.allowed_path or []] or None,
        "snippet_chars": args.snippet_chars or None,
    }
    chosen = {k: v for k, v in fields.items() if v is not None}
    if args.snippet_chars == 0 and args.op == "update":
        chosen["snippet_chars"] = None
    if args.hit_fields is not None:  # "default": the defaults (None); else the listed ones ("all" too), checked later
        names = [f.strip() for f in args.hit_fields.split(",") if f.strip()]
        chosen["hit_fields"] = None if names == ["default"] else names
    if args.no_allowed_paths and args.op == "update":
        chosen["allowed_paths"] = None
    return chosen


def warn_about_paths(profile: Any) -> None:
    """Say which of a profile's allowed paths the server's ARCHIVIST_ALLOWED_PATHS will ignore: a
    profile never widens the server's setting (services/access/paths.caller_roots)."""
    if not profile.allowed_paths:
        return
    settings = get_settings()
    if "allowed_paths" not in settings.model_fields_set:
        note(
            "ARCHIVIST_ALLOWED_PATHS is not set here: an HTTP server reads no files without it, and "
            f"profile {profile.name}'s allowed paths count only inside it."
        )
        return
    roots = [Path(p).expanduser().resolve() for p in settings.allowed_paths]
    for path in map(Path, profile.allowed_paths):
        if not any(path == root or path.is_relative_to(root) for root in roots):
            note(f"warning: {path} lies outside ARCHIVIST_ALLOWED_PATHS and is ignored until it is inside it.")


def output_text(profile: Any) -> str:
    """A profile's output settings in a word or two: "300 chars; score, url", or "-" (the defaults)."""
    parts = [f"{profile.snippet_chars} chars"] if profile.snippet_chars else []
    if profile.hit_fields is not None:
        parts.append(", ".join(profile.hit_fields) or "core fields")
    return "; ".join(parts) or "-"


def named_sources(profile: Any, titles: dict[Any, str]) -> str:
    """A profile's sources in search order as "Title (1a2b3c4d)"; an id alone when its source is gone."""
    named = [f"{titles[i]} ({str(i)[:8]})" if i in titles else str(i) for i in profile.source_ids]
    return ", ".join(named) or "no sources"


def show_profiles(profiles: list[Any], titles: dict[Any, str]) -> None:
    if not profiles:
        say("No profiles yet. Create one with: archivist profile create NAME --source SOURCE")
        return
    rows = [
        [p.name, named_sources(p, titles), p.search_type, p.match_count,
         "yes" if p.read_only else "no", "yes" if p.enabled else "no", "left out" if p.exclude_flagged else "shown",
         ", ".join(p.allowed_paths or []) or "-", output_text(p), p.description]
        for p in profiles
    ]  # fmt: skip
    columns = ["name", "sources", "type", "k", "read-only", "enabled", "flagged", "allowed paths", "hits"]
    columns.append("description")
    print_table(columns, rows, right=["k"])


async def cli_grant(app: Archivist, args: argparse.Namespace) -> None:
    """`archivist profile grant|revoke NAME --group G --subject S --email-domain D [--write]`, `grants`."""
    if args.op == "grants":
        grants = await app.grants.list(args.name)
        if getattr(args, "json", False):
            print_json([vars(g) for g in grants])
        else:
            rows = [[g.profile, g.kind, g.value, "write" if g.write else "read"] for g in grants]
            print_table(["profile", "claim", "value", "access"], rows)
        return
    claims = [("group", v) for v in args.group] + [("subject", v) for v in args.subject]
    claims += [("email_domain", v) for v in args.email_domain]
    if not claims:
        usage("name at least one --group, --subject or --email-domain", "See: archivist profile grant --help")
    for kind, value in claims:
        if args.op == "grant":
            g = await app.grants.grant(args.name, kind, value, write=args.write)
            say(f"granted {g.profile} to {g.kind} {g.value} ({'read-write' if g.write else 'read-only'})")
        else:
            await app.grants.revoke(args.name, kind, value)
            say(f"revoked {args.name} from {kind} {value}")


async def cli_profile(app: Archivist, args: argparse.Namespace) -> None:
    if args.op in ("grant", "revoke", "grants"):
        await cli_grant(app, args)
        return
    if args.op == "delete":
        await app.profiles.delete(args.name)
        say(f"deleted profile {args.name}")
        return
    if args.op == "create":
        profiles = [await app.profiles.create(args.name, **await profile_fields(app, args))]
        warn_about_paths(profiles[0])
    elif args.op == "update":
        profiles = [await app.profiles.update(args.name, **await profile_fields(app, args))]
        warn_about_paths(profiles[0])
    elif args.op == "show":
        profiles = [await app.profiles.get(args.name)]
    else:
        profiles = await app.profiles.list()
    titles = await app.sources.titles([i for p in profiles for i in p.source_ids])
    if getattr(args, "json", False):
        shown = [{**p.model_dump(mode="json"), "sources": named_list(p, titles)} for p in profiles]
        print_json(shown[0] if args.op == "show" else shown)
    else:
        show_profiles(profiles, titles)


def named_list(profile: Any, titles: dict[Any, str]) -> list[dict[str, Any]]:
    """`--json`: each source of a profile with its title (None when the source is gone)."""
    return [{"id": str(i), "title": titles.get(i)} for i in profile.source_ids]


async def http_access(app: Archivist) -> Any:
    """Whether `serve --http` on ARCHIVIST_HTTP_HOST serves callers without a token (services/access/open_state.py)."""
    from services.access.open_state import access_mode

    return await access_mode(app.settings, app.db.pool, await app.tokens.any_active())


def token_state(token: Any) -> str:
    return "revoked" if token.revoked_at else ("active" if token.active else "expired")


async def cli_token(app: Archivist, args: argparse.Namespace) -> None:
    if args.op == "create":
        token, secret = await app.tokens.create(
            args.name,
            args.profile,
            read_only=args.read_only,
            expires_in=parse_duration(args.expires) if args.expires else None,
            rate_per_minute=parse_rate(args.rate) if args.rate else None,
            max_running_jobs=args.max_jobs,
        )
        say(f"token {token.name} ({token.id}) created; the secret is shown once:\n{secret}")
        say("Give it to the client as an environment variable, e.g. export ARCHIVIST_TOKEN=<secret>")
    elif args.op == "revoke":
        token = await app.tokens.revoke(args.token)
        say(f"revoked {token.name} at {token.revoked_at}")
        say(f"HTTP access: {(await http_access(app)).text}")  # the last one never reopens the server
    else:
        tokens = await app.tokens.list()
        if args.json:
            print_json([{**t.model_dump(mode="json"), "state": token_state(t)} for t in tokens])
        elif not tokens:
            say(f"No tokens. HTTP access: {(await http_access(app)).text}")
        else:
            rows = [
                [t.name, f"{t.prefix}…", token_state(t), ",".join(t.profiles) or "*", "yes" if t.read_only else "no",
                 t.rate_per_minute, t.max_running_jobs, when(t.expires_at), when(t.last_used_at)]
                for t in tokens
            ]  # fmt: skip
            columns = ["name", "prefix", "state", "profiles", "read-only", "rate/min", "jobs", "expires", "last used"]
            print_table(columns, rows, right=["rate/min", "jobs"])


def show_audit_stats(summary: dict[str, Any], args: argparse.Namespace) -> None:
    """`archivist audit --stats`: calls per profile and tool (p50/p95 ms), then the top queries."""
    if args.json:
        print_json(summary)
        return
    total = summary["total"]
    rows = [
        [g["profile"] or "(no profile)", g["tool"], g["calls"], g["errors"], f"{g['p50_ms']:.1f}", f"{g['p95_ms']:.1f}"]
        for g in summary["by_profile_tool"]
    ]
    numbers = ["calls", "errors", "p50 ms", "p95 ms"]
    print_table(["profile", "tool", *numbers], rows, right=numbers)
    if total["calls"]:
        say(f"({total['calls']} calls since {args.since} ago, {total['errors']} failed; "
            f"p50 {total['p50_ms']:.1f} ms, p95 {total['p95_ms']:.1f} ms)")  # fmt: skip
    else:
        say(f"(no calls since {args.since} ago)")
    if summary["top_queries"]:
        say("\nMost frequent queries:")
        print_table(["calls", "query"], [[q["calls"], q["query"]] for q in summary["top_queries"]], right=["calls"])


async def cli_audit(app: Archivist, args: argparse.Namespace) -> None:
    if args.prune:
        n = await app.audit.prune(timedelta(days=app.settings.audit_retention_days))
        say(f"pruned {n} entries")
        return
    if getattr(args, "stats", False):
        show_audit_stats(await app.audit.summary(parse_duration(args.since), args.tool, args.token), args)
        return
    page = await app.audit.query(parse_duration(args.since), args.tool, args.token, args.errors, args.page, 20)
    if args.json:
        print_json(page)
        return
    rows = [
        [f"{e.at:%Y-%m-%d %H:%M:%S}", e.who, e.tool, e.action, e.error_code or "ok", f"{e.latency_ms:.1f}",
         e.response_bytes]
        for e in page.items
    ]  # fmt: skip
    if rows:
        print_table(["time", "who", "tool", "action", "outcome", "ms", "bytes"], rows, right=["ms", "bytes"])
    say(f"({page.total_count} entries; page {page.page})")
