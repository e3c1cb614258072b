"""`archivist doctor`: a readable health report (database, models, worker, queue, audit), or `--json`."""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from commands.output import out, print_json
from services.core.settings import Settings


def add_doctor_command(sub: Any) -> None:
    doctor = sub.add_parser(
        "doctor",
        help="report database, models, worker and queue health",
        description="Check the knowledge base: database, embedding model, workers, job queue and audit log. "
        "Exits 1 when the database is down.",
        epilog="examples:\n  archivist doctor\n  archivist doctor --json",
    )
    doctor.add_argument("--json", action="store_true", help="print JSON for scripts")


def mark(ok: bool) -> str:
    return "[green]ok[/green]" if ok else "[red]problem[/red]"


def database_line(database: dict[str, Any], settings: Settings) -> str:
    parts = ["DATABASE_URL" if settings.database_url else f"embedded PostgreSQL in {settings.data_dir}"]
    if "postmaster_alive" in database:
        parts.append("running" if database["postmaster_alive"] else "not running")
        parts.append(f"{database.get('restarts', 0)} restarts")
    for key in ("error", "last_error", "data_dir_problem"):
        if database.get(key):
            parts.append(str(database[key]))
    return ", ".join(parts)


def workers_row(worker: dict[str, Any], queue: dict[str, Any]) -> tuple[str, str]:
    """The workers running on this database (any process), told apart from doctor's own, which runs none."""
    live = worker.get("live_workers", [])
    shown = ", ".join(live[:3]) + (f" and {len(live) - 3} more" if len(live) > 3 else "")
    running = f"{len(live)} running ({shown})" if live else "none running"
    text = f"{running}, {worker['running_jobs']} jobs running; this process (doctor) runs no worker"
    if not live and queue.get("queued", 0):
        return (
            "[yellow]warning[/yellow]",
            f"{text}; {queue['queued']} queued jobs wait for `archivist worker` or `archivist serve`",
        )
    return mark(True), text


def queue_line(queue: dict[str, Any]) -> str:
    counts = {k: v for k, v in queue.items() if k != "ok"}
    return ", ".join(f"{n} {status}" for status, n in counts.items()) or "empty"


def show_report(body: dict[str, Any], settings: Settings) -> None:
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_column(overflow="fold")
    database = body.get("database", {})
    table.add_row("database", mark(database.get("ok", False)), database_line(database, settings))
    if "models" in body:
        models, worker, audit = body["models"], body["worker"], body["audit"]
        table.add_row("embedding", mark(True), f"{models['embedding_model']} ({models['embedding_dim']} dims)")
        table.add_row("workers", *workers_row(worker, body["queue"]))
        table.add_row("job queue", mark(body["queue"].get("ok", False)), queue_line(body["queue"]))
        table.add_row("audit log", mark(audit.get("dropped", 0) == 0), f"{audit['written']} written, "
                      f"{audit['dropped']} dropped")  # fmt: skip
    if "http_access" in body:
        access = body["http_access"]
        table.add_row("HTTP access", "[yellow]open[/yellow]" if access["open"] else "closed", access["state"])
    console = out()
    console.print(table)
    console.print("All good." if body["ok"] else "[red]The database is not answering.[/red]")


async def cli_doctor(settings: Settings, args: argparse.Namespace) -> None:
    """Print the report; exit 1 when the database is down."""
    from commands.access import http_access
    from commands.owner import open_archivist
    from services.core.errors import service_error_from
    from services.health import report

    try:
        app = await open_archivist(settings)
    except Exception as exc:
        mapped = service_error_from(exc)
        reason = f"{mapped.message} {mapped.suggestion}" if mapped else f"{type(exc).__name__}: {exc}"
        body: dict[str, Any] = {"ok": False, "database": {"ok": False, "error": reason}}
    else:
        try:
            body = await report(app)
            mode = await http_access(app)
            body["http_access"] = {"open": mode.open, "state": mode.text}
        finally:
            await app.close()
    if args.json:
        print_json(body)
    else:
        show_report(body, settings)
    if not body["ok"]:
        raise SystemExit(1)
