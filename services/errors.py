"""Errors the services raise; tools turn them into the JSON error contract."""

from __future__ import annotations


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
    code = "RATE_LIMITED"
    retryable = True


RETRY_SUGGESTION = "The database is unreachable or restarting; retry in a few seconds."
_DISK_ERRNOS = {28: "is full", 30: "is read-only", 122: "is over its disk quota"}  # ENOSPC, EROFS, EDQUOT


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
    if isinstance(exc, connection_errors):
        return Unavailable(f"The database is not available ({type(exc).__name__}).", RETRY_SUGGESTION)
    if isinstance(exc, asyncpg.InterfaceError) and any(
        word in str(exc).lower() for word in ("closed", "connection", "pool is closing", "released")
    ):
        return Unavailable("The database connection was lost.", RETRY_SUGGESTION)
    if isinstance(exc, OSError) and (getattr(exc, "errno", None) in (101, 111, 113) or _from_asyncpg(exc)):
        return Unavailable(f"The database cannot be reached ({exc.strerror or exc}).", RETRY_SUGGESTION)
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
        return Unavailable(
            "The database's data directory is full.",
            "Free disk space in the data directory (ARCHIVIST_DATA_DIR/pgdata or the server's), then retry.",
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


def _from_asyncpg(exc: BaseException) -> bool:
    """Whether an OSError came out of asyncpg's connecting (e.g. a restarting server's socket file missing)."""
    tb = exc.__traceback__
    while tb is not None:
        if "asyncpg" in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False
