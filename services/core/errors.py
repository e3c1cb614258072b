"""Errors the services raise; tools turn them into the JSON error contract."""

from __future__ import annotations

import os
from pathlib import Path


class ServiceError(Exception):
    """Base error: a code an agent can branch on, and what to do next."""

    code = "INTERNAL"
    retryable = False

    def __init__(self, message: str, suggestion: str = "", *, retryable: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.suggestion = suggestion
        if retryable is not None:
            self.retryable = retryable


class InvalidArgument(ServiceError):
    code = "INVALID_ARGUMENT"


class OverBudget(InvalidArgument):
    """Outside content over its format's budget (services/core/budgets.py): too large, too deep, too many
    expansions or too slow to parse. Not retryable: the same bytes fail the same way."""

    def __init__(self, message: str, suggestion: str = "", *, budget: str = "") -> None:
        super().__init__(message, suggestion)
        self.budget = budget  # the format whose budget was exceeded, e.g. "openapi"


class NotFound(ServiceError):
    code = "NOT_FOUND"


class Conflict(ServiceError):
    code = "CONFLICT"


class Unavailable(ServiceError):
    code = "UNAVAILABLE"
    retryable = True


class PermissionDenied(ServiceError):
    code = "PERMISSION_DENIED"


class CallTimeout(ServiceError):
    code = "TIMEOUT"
    retryable = True


class RateLimited(ServiceError):
    """Too many calls (or jobs) at once: retry after `retry_after_seconds` (None: no estimate)."""

    code = "RATE_LIMITED"
    retryable = True

    def __init__(
        self,
        message: str,
        suggestion: str = "",
        *,
        retryable: bool | None = None,
        retry_after_seconds: float | None = None,
    ) -> None:
        super().__init__(message, suggestion, retryable=retryable)
        self.retry_after_seconds = retry_after_seconds


RETRY_SUGGESTION = "The database is unreachable or restarting; retry in a few seconds."
_DISK_ERRNOS = {28: "is full", 30: "is read-only", 122: "is over its disk quota"}  # ENOSPC, EROFS, EDQUOT
#: Below this much free space PostgreSQL cannot start a new WAL segment: the directory counts as full.
LOW_SPACE_BYTES = 16 * 1024 * 1024
#: The embedded PostgreSQL's data directory (set by services.core.database); a database fault is explained
#: by its disk state (full, read-only) when it has one.
_data_dir: Path | None = None


def watch_data_dir(path: Path | None) -> None:
    """Name the directory whose disk state explains database faults (the embedded server's pgdata)."""
    global _data_dir
    _data_dir = path


def disk_problem(path: Path) -> str | None:
    """'is read-only' / 'is full (N MB free)' for the file system holding `path`; None if writable with room."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        stat = os.statvfs(probe)
    except OSError:
        return None
    if stat.f_flag & os.ST_RDONLY:
        return "is read-only"
    free = stat.f_bavail * stat.f_frsize
    if free < LOW_SPACE_BYTES:
        return f"is full ({free / 1048576:.1f} MB free)"
    return None


def data_dir_unavailable() -> Unavailable | None:
    """UNAVAILABLE naming the embedded data directory when its disk is full or read-only, else None."""
    if _data_dir is None:
        return None
    problem = disk_problem(_data_dir)
    if problem is None:
        return None
    return Unavailable(
        f"The database cannot write: its data directory {_data_dir} {problem}.",
        f"Free disk space in (or make writable) {_data_dir}; Archivist restarts the database by itself, then retry.",
    )


def unavailable_from(exc: BaseException) -> Unavailable | None:
    """The one mapping of infrastructure faults to UNAVAILABLE (lost/refused database connections, a
    restarting server, too many connections, a full or read-only disk); None for anything else."""
    import asyncpg  # lazily: keeps this module import-light

    disk = _disk_error(exc)
    if disk is not None:
        return disk
    connection_errors = (
        asyncpg.ConnectionDoesNotExistError,
        asyncpg.CannotConnectNowError,
        asyncpg.PostgresConnectionError,
        asyncpg.TooManyConnectionsError,
        asyncpg.exceptions.AdminShutdownError,
        asyncpg.exceptions.CrashShutdownError,
        asyncpg.exceptions.InsufficientResourcesError,
        asyncpg.exceptions.InternalClientError,  # a connection left mid-operation when the server vanished
        ConnectionError,
        TimeoutError,
    )
    if isinstance(exc, connection_errors) or _io_fault(exc):
        return data_dir_unavailable() or Unavailable(
            f"The database is not available ({type(exc).__name__}).", RETRY_SUGGESTION
        )
    if isinstance(exc, asyncpg.InterfaceError) and any(
        word in str(exc).lower() for word in ("closed", "connection", "pool is closing", "released")
    ):
        return data_dir_unavailable() or Unavailable("The database connection was lost.", RETRY_SUGGESTION)
    if isinstance(exc, OSError) and (getattr(exc, "errno", None) in (101, 111, 113) or _from_asyncpg(exc)):
        return data_dir_unavailable() or Unavailable(
            f"The database cannot be reached ({exc.strerror or exc}).", RETRY_SUGGESTION
        )
    return None


def _address(dsn: str) -> str:
    """host:port of a connection URL, without user or password ('the address' when it is not a URL)."""
    from urllib.parse import parse_qs, urlsplit

    try:
        parts = urlsplit(dsn)
        host, port = parts.hostname, parts.port or 5432
    except ValueError:
        return "the address"
    if host:
        return f"{host}:{port}"
    socket_dir = parse_qs(parts.query).get("host")
    return f"the socket in {socket_dir[0]}" if socket_dir else "the address"


def connect_failure(exc: BaseException, setting: str, dsn: str) -> Unavailable | None:
    """A failed first connection, naming the setting and the host:port tried. A person is told what to
    check; an unknown host, a bad login or a missing database is not retryable, a refused or unreachable
    address is (a database that is starting answers soon)."""
    import socket

    import asyncpg

    where = _address(dsn)
    if isinstance(exc, socket.gaierror):
        return Unavailable(
            f"The database host in {setting} cannot be resolved ({where}: {exc.strerror or exc}).",
            f"Check {setting}: the host name is wrong or not known on this machine.",
            retryable=False,
        )
    if isinstance(exc, ConnectionRefusedError):
        return Unavailable(
            f"Nothing accepts connections at {where}, the address in {setting}.",
            f"Check {setting} (host and port), and that PostgreSQL is running there.",
            retryable=True,  # for a program: a server that is starting answers soon; a person checks the address
        )
    if isinstance(exc, asyncpg.InvalidAuthorizationSpecificationError | asyncpg.InvalidPasswordError):
        return Unavailable(
            f"The database at {where} refused the user or password in {setting} ({exc}).",
            f"Check the user and password in {setting}.",
            retryable=False,
        )
    if isinstance(exc, asyncpg.InvalidCatalogNameError):
        return Unavailable(
            f"The database named in {setting} does not exist at {where} ({exc}).",
            f"Check the database name in {setting}, or create it (createdb).",
            retryable=False,
        )
    if isinstance(exc, TimeoutError | OSError):
        return Unavailable(
            f"The database at {where} ({setting}) cannot be reached ({type(exc).__name__}: {exc}).",
            f"Check that {where} is reachable from this machine; if it is restarting, retry in a few seconds.",
        )
    return None


def _disk_error(exc: BaseException) -> Unavailable | None:
    import asyncpg

    errno = getattr(exc, "errno", None)
    if isinstance(exc, OSError) and errno in _DISK_ERRNOS:
        where = getattr(exc, "filename", None) or "the data directory"
        return Unavailable(
            f"Cannot write: {where} {_DISK_ERRNOS[errno]}.",
            f"Free space in (or make writable) {where}, then retry.",
        )
    if isinstance(exc, asyncpg.exceptions.DiskFullError):
        where = _data_dir or "the PostgreSQL server's data directory (SHOW data_directory)"
        return Unavailable(
            f"The database's data directory {where} is full.", f"Free disk space in {where}, then retry."
        )
    if isinstance(exc, asyncpg.exceptions.ReadOnlySQLTransactionError):
        return Unavailable(
            "The database is read-only.", "Point Archivist at a writable (primary) database, then retry."
        )
    return None


def service_error_from(exc: BaseException) -> ServiceError | None:
    """What an unexpected exception means to a caller (tools, web console, CLI): UNAVAILABLE for
    infrastructure faults, INVALID_ARGUMENT for text PostgreSQL cannot store; None means INTERNAL."""
    import asyncpg

    if isinstance(exc, ServiceError):
        return exc
    unavailable = unavailable_from(exc)
    if unavailable is not None:
        return unavailable
    if isinstance(
        exc, asyncpg.exceptions.CharacterNotInRepertoireError | asyncpg.exceptions.UntranslatableCharacterError
    ) or (isinstance(exc, UnicodeEncodeError) and "surrogate" in str(exc)):
        return InvalidArgument(
            "The text contains characters that cannot be stored (such as NUL).",
            "Remove NUL (\\x00) and other control characters from the text and retry.",
        )
    return None


def _io_fault(exc: BaseException) -> bool:
    """A PostgreSQL error of class 58 (system error: e.g. it could not write a file)."""
    import asyncpg

    return isinstance(exc, asyncpg.PostgresError) and str(getattr(exc, "sqlstate", "") or "").startswith("58")


def _from_asyncpg(exc: BaseException) -> bool:
    """Whether an OSError came out of asyncpg's connecting (e.g. a restarting server's socket file missing)."""
    tb = exc.__traceback__
    while tb is not None:
        if "asyncpg" in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False
