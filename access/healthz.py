"""GET /healthz: `{"ok": true|false}` for anyone; the full report (database, queue, audit) only with a
valid Archivist bearer token, or for a request the open-state predicate serves as the local owner
(services/access/open_state.py: the same answer /mcp and the console give).
The report is redacted all the same."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from services.access.redaction import redact

if TYPE_CHECKING:
    from services.app import Runtime

#: longest wait for the token check: a health probe must answer even while the database hangs
CHECK_SECONDS = 3.0


def bearer(request: Request) -> str | None:
    scheme, _, secret = request.headers.get("authorization", "").partition(" ")
    return (secret.strip() or None) if scheme.lower() == "bearer" else None


async def may_see_details(request: Request, gate: Any, verifier: Any) -> bool:
    secret = bearer(request)
    if secret is not None:
        token = await verifier.verify_token(secret) if verifier is not None else None
        # a token of the team's identity provider (docs/identity.md) is a person, not the operator:
        # whatever its grants, it gets only ok / not ok
        return token is not None and "identity" not in (token.claims or {})
    return gate is not None and bool(await gate.open_for(request.headers.get("host", ""), request.headers.keys()))


def healthz_endpoint(runtime: Runtime, gate: Any = None, verifier: Any = None) -> Any:
    """The Starlette handler; `gate`/`verifier` are the HTTP auth gate and token verifier (None: no details)."""
    from services.health import runtime_report

    async def healthz(request: Request) -> JSONResponse:
        body, status = await runtime_report(runtime)
        try:
            detailed = await asyncio.wait_for(may_see_details(request, gate, verifier), CHECK_SECONDS)
        except Exception:
            detailed = False  # the check failed or hung (database down): say no more than ok / not ok
        return JSONResponse(redact(body) if detailed else {"ok": bool(body.get("ok"))}, status_code=status)

    return healthz
