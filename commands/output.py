"""How commands answer: rich tables and progress bars for people, `--json` for scripts.

Results go to stdout; progress, notes and errors go to stderr. Colour appears only on a terminal (rich
decides, and honours NO_COLOR); piped tables are not wrapped at 80 columns.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NoReturn

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

PIPE_WIDTH = 200


def make_console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    return Console(file=stream, width=None if stream.isatty() else PIPE_WIDTH, highlight=False)


def out() -> Console:
    """The console for results (stdout), made per call so redirected streams (tests) are honoured."""
    return make_console()


def err() -> Console:
    return make_console(stderr=True)


def jsonable(value: Any) -> Any:
    """Pydantic models, dataclasses, datetimes and containers as plain JSON values."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def print_json(value: Any) -> None:
    print(json.dumps(jsonable(value), indent=2, ensure_ascii=False))


def print_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, right: Sequence[str] = ()) -> None:
    """An aligned table; `right` names the numeric columns."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in columns:
        table.add_column(column, justify="right" if column in right else "left", overflow="fold")
    for row in rows:
        table.add_row(*("-" if cell is None else str(cell) for cell in row))
    out().print(table)


def say(message: str) -> None:
    """One line for people on stdout (no markup is interpreted)."""
    out().print(message, markup=False)


def note(message: str) -> None:
    """A side remark on stderr."""
    err().print(message, markup=False, style="dim")


def fail(message: str, suggestion: str | None = None, code: int = 1) -> NoReturn:
    """Stop with `error: message` and the next step on stderr: exit 1 for a failure, 2 for a usage error."""
    console = err()
    console.print(f"error: {message}", style="red", markup=False)
    if suggestion:
        console.print(suggestion, markup=False)
    raise SystemExit(code)


def usage(message: str, suggestion: str | None = None) -> NoReturn:
    """A command line that cannot be run as given (exit 2, like argparse's own usage errors)."""
    fail(message, suggestion, code=2)


def progress_bar(unit: str) -> Progress:
    """A progress bar on stderr showing done/total, the unit and the elapsed time (off a terminal, rich
    prints its final state once)."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit))
    return Progress(*columns, TextColumn("{task.fields[extra]}"), TimeElapsedColumn(), console=err())


def when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value else "-"
