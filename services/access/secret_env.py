"""Which of the server's environment variables a caller may have sent to a site (crawl headers and
cookies, a git source's token). Anyone who may start a crawl chooses where it goes, so a variable is
only sent when the operator listed it in ARCHIVIST_SECRET_ENV (names or shell patterns, comma-separated),
or when the caller is the local owner, who holds the server's environment anyway."""

from __future__ import annotations

import os
from fnmatch import fnmatchcase

from services.access.scope import current_scope
from services.errors import PermissionDenied

SETTING = "ARCHIVIST_SECRET_ENV"


def listed_variables() -> list[str]:
    return [p.strip() for p in os.environ.get(SETTING, "").split(",") if p.strip()]


def caller_is_owner() -> bool:
    scope = current_scope()
    return scope.source_ids is None and not scope.read_only


def check_secret_variable(variable: str, argument: str) -> None:
    """PermissionDenied unless `variable` may be sent on this caller's behalf."""
    if any(fnmatchcase(variable, pattern) for pattern in listed_variables()) or caller_is_owner():
        return
    raise PermissionDenied(
        f"{argument} may not use the server's variable {variable}: only variables the operator lists in "
        f"{SETTING} can be sent to a site.",
        f"Ask the server's operator to add {variable} to {SETTING}, or crawl without it.",
    )
