"""The one gate for every outbound secret: crawl headers and cookies, a git source's token, and
whatever sends a server's environment variable to a site next. A caller names a variable (`env:NAME`,
`auth_env=NAME`); its value leaves the server only through `secret_value`, which no other module
may bypass (tests/test_architecture.py fails on any other read of a variable named at run time).

Two rules, both inside the gate, checked when the variable is named (queueing a crawl, binding or
syncing a git source) and again when a job reads it:
- the server's own variables (`ARCHIVIST_*` - the request-state key, the OAuth client secret -,
  `DATABASE_URL`, `PG*`, `POSTGRES_*`) are never sent, whoever asks;
- anyone who may start a crawl chooses where it goes, so only variables the operator lists in
  ARCHIVIST_SECRET_ENV (names or shell patterns, comma-separated) may be sent, unless the caller is
  the local owner (stdio, the command line, an open loopback server or console with no tokens), who
  holds the server's environment anyway. A bearer token never counts as the owner, with or without
  profiles: the scope says so explicitly (`Scope.local_owner`), it is not inferred from its reach.
"""

from __future__ import annotations

import os
import re
from fnmatch import fnmatchcase

from services.access.scope import current_scope
from services.core.errors import InvalidArgument, PermissionDenied

SETTING = "ARCHIVIST_SECRET_ENV"
#: The server's own settings and database credentials: never sent to a site, not even by the owner.
SERVER_VARIABLES = re.compile(r"ARCHIVIST_.*|PG[A-Z_]*|DATABASE_URL|POSTGRES_.*")


def listed_variables() -> list[str]:
    return [p.strip() for p in os.environ.get(SETTING, "").split(",") if p.strip()]


def check_variable(variable: str, argument: str) -> None:
    """InvalidArgument for a server variable; PermissionDenied unless `variable` may be sent on the
    current caller's behalf (listed in ARCHIVIST_SECRET_ENV, or the caller is the local owner)."""
    if SERVER_VARIABLES.fullmatch(variable):
        raise InvalidArgument(
            f"{argument} names one of the server's own variables ({variable}), which are never sent to a site.",
            "Use a variable of its own for the site's secret, e.g. DOCS_TOKEN.",
        )
    if any(fnmatchcase(variable, pattern) for pattern in listed_variables()) or current_scope().local_owner:
        return
    raise PermissionDenied(
        f"{argument} may not use the server's variable {variable}: only variables the operator lists in "
        f"{SETTING} can be sent to a site.",
        f"Ask the server's operator to add {variable} to {SETTING}, or go without it.",
    )


def secret_value(variable: str, argument: str) -> str:
    """The value of `variable`, stripped, after `check_variable`: the only read of a caller-named
    variable. InvalidArgument naming the variable (never its value) when it is not set."""
    check_variable(variable, argument)
    value = os.environ.get(variable, "").strip()
    if not value:
        raise InvalidArgument(
            f"The environment variable {variable} ({argument}) is not set on the server.",
            f"Set {variable} in the server's (and workers') environment, then retry.",
        )
    return value


def held_variables() -> list[str]:
    """The names of the variables this process could send (set, and not one of the server's own): what
    a worker tells the job queue it holds. Names only; a value still leaves only through `secret_value`."""
    return sorted(name for name, value in os.environ.items() if value.strip() and not SERVER_VARIABLES.fullmatch(name))
