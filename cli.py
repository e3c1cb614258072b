"""The `archivist` command line: parse the arguments and dispatch to `commands/` (or serve MCP)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any

from rich_argparse import RawDescriptionRichHelpFormatter

from services.access.scope import Scope, use_scope
from services.core.settings import get_settings

logger = logging.getLogger("archivist")

#: libraries whose INFO lines (pg_ctl command lines, model loading, per-request logs) only -vv shows
CHATTY_LOGGERS = (
    "pgserver",
    "uvicorn",
    "uvicorn.access",
    "mcp",
    "httpx",
    "httpcore",
    "sentence_transformers",
    "transformers",
    "huggingface_hub",
    "onnxruntime",
    "crawl4ai",
    "watchfiles",
)
BACKUP_COMMANDS = ("backup", "restore", "export")
LEVELS = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}


class ArchivistParser(argparse.ArgumentParser):
    """Every (sub)command's parser: rich help that keeps the examples' line breaks."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", RawDescriptionRichHelpFormatter)
        super().__init__(*args, **kwargs)


def log_level(verbose: int) -> int:
    """-v: INFO, -vv: DEBUG; otherwise ARCHIVIST_LOG_LEVEL, else WARNING (warnings and errors only)."""
    if verbose >= 2:
        return logging.DEBUG
    if verbose == 1:
        return logging.INFO
    named = os.environ.get("ARCHIVIST_LOG_LEVEL", "WARNING").upper()
    return getattr(logging, named) if named in LEVELS else logging.WARNING


def configure_logging(level: int) -> None:
    """Logging goes to stderr only (stdout carries results, and the stdio transport)."""
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if level > logging.DEBUG:
        for name in CHATTY_LOGGERS:
            logging.getLogger(name).setLevel(max(level, logging.WARNING))
    logging.captureWarnings(True)
    if level > logging.DEBUG:
        logging.getLogger("py.warnings").setLevel(logging.ERROR)


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("archivist")
    except PackageNotFoundError:
        return "unknown"


def add_global_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action="version", version=f"archivist {package_version()}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more log output on stderr (-v info, -vv debug)"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="knowledge base directory of the embedded PostgreSQL (default: ARCHIVIST_DATA_DIR)",
    )
    from services.access.disclosure import install_log_redaction

    install_log_redaction()


def add_completion_command(sub: Any) -> None:
    completion = sub.add_parser(
        "completion",
        help="print a shell completion script",
        description="Print a tab-completion script for your shell.",
        epilog="examples:\n  archivist completion bash > ~/.local/share/bash-completion/completions/archivist\n"
        "  archivist completion zsh > ~/.zfunc/_archivist",
    )
    completion.add_argument("shell", choices=["bash", "zsh", "tcsh"], help="the shell to complete in")


def build_parser() -> argparse.ArgumentParser:
    from commands.access import add_access_commands
    from commands.backup import add_backup_commands
    from commands.config import add_config_command
    from commands.doctor import add_doctor_command
    from commands.flags import add_flags_command
    from commands.jobs import add_job_commands
    from commands.kb import add_kb_commands
    from commands.serve import add_serve_command
    from commands.sources import add_source_commands
    from commands.sync import add_sync_command

    parser = ArchivistParser(
        prog="archivist",
        description="Archivist: a knowledge base for AI agents, served over MCP.",
        epilog='examples:\n  archivist ingest ~/notes --source Notes\n  archivist search "how do I ..."\n'
        "  archivist serve\n\nRun `archivist COMMAND --help` for a command's options.",
    )
    add_global_options(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    add_serve_command(sub)
    add_config_command(sub)
    add_kb_commands(sub)
    add_source_commands(sub)
    add_job_commands(sub)
    add_sync_command(sub)
    add_doctor_command(sub)
    add_flags_command(sub)
    add_access_commands(sub)
    add_backup_commands(sub)
    add_completion_command(sub)
    return parser


def dispatch(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    if args.command == "completion":
        import shtab

        print(shtab.complete(parser, args.shell))
        return
    settings = get_settings()
    if args.command == "serve":
        from commands.serve import serve

        serve(args, settings)
    elif args.command == "config":
        from commands.config import print_client_config

        print_client_config(args, settings)
    elif args.command in BACKUP_COMMANDS:
        from commands.backup import run_backup_command

        with use_scope(Scope.owner()):  # the command line is the local owner, said out loud
            run_backup_command(args, settings)
    else:
        from commands.kb import GRACEFUL, run_human_command
        from commands.lifecycle import run_stoppable

        async def body(stop: asyncio.Event) -> None:
            await run_human_command(args, settings, stop)

        with use_scope(Scope.owner()):  # the command line is the local owner, said out loud
            asyncio.run(run_stoppable(body, graceful=args.command in GRACEFUL))


def report_failure(exc: Exception) -> None:
    """An exception that reached the top, as people read it: a service error (or an infrastructure fault
    it stands for) is its message and next step; anything else is named as a bug, with the traceback
    behind -vv. Exit code 1 either way (2 is for usage errors)."""
    from commands.output import fail
    from services.core.errors import ServiceError, service_error_from

    mapped = exc if isinstance(exc, ServiceError) else service_error_from(exc)
    if mapped is not None:
        fail(mapped.message, mapped.suggestion or None, code=1)
    logger.debug("unexpected failure", exc_info=exc)
    fail(f"{type(exc).__name__}: {exc}", "This is a bug: run again with -vv for the traceback, and report it.", code=1)


def quiet_broken_pipe() -> None:
    """The reader of stdout left (`archivist completion bash | head`): stop without a traceback, and
    without another one when Python flushes stdout on the way out."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def main(argv: list[str] | None = None) -> None:
    """Exit codes: 0 success, 1 failure (the message names what failed and what to do), 2 usage."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.data_dir is not None:
        os.environ["ARCHIVIST_DATA_DIR"] = str(args.data_dir.expanduser().resolve())
    configure_logging(log_level(args.verbose))
    try:
        dispatch(args, parser)
        sys.stdout.flush()
    except KeyboardInterrupt:  # a Ctrl-C before the stop handlers are in place
        print("stopped", file=sys.stderr)
    except BrokenPipeError:
        quiet_broken_pipe()
    except Exception as exc:
        report_failure(exc)


if __name__ == "__main__":
    main()
