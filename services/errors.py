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
