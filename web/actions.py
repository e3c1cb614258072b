"""Console actions (every form POST behind sign-in) count like MCP tool calls: one call from the caller's
rate bucket (services/access/identity.rate_bucket, the MCP gate's rule) and one audit entry, refusals
included. Bodies are bounded per form: a few KB for ordinary forms, a document's worth for pasted text,
one file for the upload form, and no file part anywhere else."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from services.access.identity import Caller, rate_bucket
from services.access.scope import Scope

if TYPE_CHECKING:
    from services.app import Archivist

logger = logging.getLogger(__name__)
AUDIT_TOOL = "console"
SMALL_FORM_BYTES = 16 * 1024
UPLOAD_OVERHEAD = 64 * 1024
CODE_BY_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "CONFLICT",
    413: "TOO_LARGE",
    429: "RATE_LIMITED",
    503: "UNAVAILABLE",
}


@dataclass(frozen=True)
class BodyRule:
    """How much a route reads: `max_bytes` in all (Starlette's route body limit), at most `max_files` files."""

    max_bytes: int
    max_files: int = 0


def body_rule(kind: str, max_file_bytes: int) -> BodyRule:
    """ "form": a few KB, no file; "text": a pasted document, no file; "file": one upload."""
    if kind == "file":
        return BodyRule(max_file_bytes + UPLOAD_OVERHEAD, max_files=1)
    if kind == "text":
        return BodyRule(max_file_bytes + SMALL_FORM_BYTES)
    return BodyRule(SMALL_FORM_BYTES)


async def take_call(app: Archivist, token: Any) -> None:
    """One call from the caller's bucket (raises RateLimited when it is empty); the local owner has
    none unless ARCHIVIST_LOCAL_RATE_PER_MINUTE is set, exactly as over MCP."""
    if token is None:
        caller = Caller(transport="console", session="console")
    elif getattr(token, "identity", None) is not None:  # an identity-provider sign-in (web/sso.py)
        caller = Caller(identity=token.identity)
    else:
        caller = Caller(token=token.name, rate_per_minute=getattr(token, "rate_per_minute", None))
    bucket = rate_bucket(caller, app.settings)
    if bucket is not None:
        await app.ratelimit.take(*bucket)


def audit_action(
    app: Archivist,
    scope: Scope | None,
    action: str,
    request: Request,
    response: Response,
    started: float,
    failure: str | None = None,
) -> None:
    """Queue one audit entry for a console action (a refusal with its message, redacted there); never raises."""
    try:
        who = scope.who if scope is not None else "console"
        profiles = list(scope.profiles) if scope is not None else []
        code = None if response.status_code < 400 else CODE_BY_STATUS.get(response.status_code, "INTERNAL")
        latency = (time.perf_counter() - started) * 1000
        size = len(getattr(response, "body", b"") or b"")
        arguments = {"path": request.url.path}
        app.audit.record(AUDIT_TOOL, action, who, profiles, arguments, code, latency, size, failure)
    except Exception:
        logger.warning("audit record of a console action failed", exc_info=True)
