"""Console actions (every form POST behind sign-in) count like MCP tool calls: they pass the same gate
(services/access/gate.admitted: one call from the caller's rate bucket and one audit entry, refusals
included); `measure_page` reads an action's outcome off its page. Bodies are bounded per form: a few
KB for ordinary forms, a document's worth for pasted text, one file for the upload form, and no file
part anywhere else."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from services.access.gate import Outcome

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


def measure_page(request: Request, response: Response, outcome: Outcome) -> None:
    """What the audit keeps of a console action: the error code its status stands for (None below
    400), the refusal's message, the page's size."""
    outcome.code = None if response.status_code < 400 else CODE_BY_STATUS.get(response.status_code, "INTERNAL")
    outcome.message = getattr(request.state, "failure", None) if outcome.code else None
    outcome.size = len(getattr(response, "body", b"") or b"")
