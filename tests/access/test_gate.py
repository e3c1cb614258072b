"""The one gate below the edges (services/access/gate.py): a caller built one way from a token, admitted
(scope, one call from its rate bucket), run inside its scope, audited once whatever happens; the rate
limit's wait is a field of RateLimited; the one call time limit."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.access.gate import Outcome, admitted, call_time_limit, caller_from_bearer, caller_from_token
from services.access.scope import Scope, current_scope, use_scope
from services.core.errors import CallTimeout, RateLimited


def measure(result: Any, outcome: Outcome) -> None:
    """A refusal (None here) keeps the code the gate found; an answer is a success."""
    if result is not None:
        outcome.code, outcome.size = None, len(str(result))


async def audited(app: Any, tool: str, count: int) -> list[Any]:
    """The audit entries of `tool`, once `count` are written (the writer task may hold some a moment)."""
    for _ in range(100):
        await app.audit.flush()
        entries = (await app.audit.query(tool=tool)).items
        if len(entries) >= count:
            return entries
        await asyncio.sleep(0.05)
    return entries


async def test_a_token_is_admitted_rate_limited_and_audited_once_per_call(app: Any) -> None:
    with use_scope(Scope.owner()):
        source = await app.sources.create(title="Gate src", source_type="api")
        await app.profiles.create("gate", "", [source.id])
        record, _ = await app.tokens.create("gate-token", ["gate"], rate_per_minute=1, max_running_jobs=2)
    caller = caller_from_token(record)
    # the MCP transport's claims of the same token make the same caller
    claims = {"profiles": ["gate"], "read_only": False, "rate": 1, "max_jobs": 2}
    assert caller_from_bearer("gate-token", claims) == caller

    async def open_app() -> Any:
        return app

    async def run() -> Scope:
        return current_scope()

    refusals: list[Exception] = []

    def refuse(exc: Exception) -> Any:
        refusals.append(exc)
        return None

    scope = await admitted(open_app, caller, "probe", {"path": "/x"}, run, refuse=refuse, measure=measure)
    assert scope.source_ids == frozenset({source.id}) and scope.who == "gate-token"
    assert scope.max_running_jobs == 2
    assert await admitted(open_app, caller, "probe", {}, run, refuse=refuse, measure=measure) is None
    (limited,) = refusals
    assert isinstance(limited, RateLimited) and limited.retry_after_seconds is not None
    assert 0 < limited.retry_after_seconds <= 60
    # one per call, the refusal too (the writer task and a flush may store them in either order)
    entries = sorted(await audited(app, "probe", 2), key=lambda e: e.error_code or "")
    assert [(e.who, e.error_code) for e in entries] == [("gate-token", None), ("gate-token", "RATE_LIMITED")]
    assert entries[0].profiles == ["gate"] and entries[0].arguments == {"path": "/x"}


async def test_a_failing_run_is_audited_and_raised(app: Any) -> None:
    async def open_app() -> Any:
        return app

    async def run() -> None:
        raise RuntimeError("boom")

    caller = caller_from_token(None, transport="console", session="console")
    with pytest.raises(RuntimeError):
        await admitted(open_app, caller, "probe-fail", {}, run, refuse=lambda e: None, measure=measure)
    (entry,) = await audited(app, "probe-fail", 1)
    assert entry.who == "console" and entry.error_code == "INTERNAL" and entry.error_message == "RuntimeError"


async def test_one_call_time_limit() -> None:
    class Quick:
        call_timeout_seconds = 0.05

    with pytest.raises(CallTimeout) as raised:
        async with call_time_limit(Quick(), "probe", suggestion="Retry."):
            await asyncio.sleep(5)
    assert raised.value.retryable and raised.value.suggestion == "Retry."
    assert "probe took longer than 0.05s" in raised.value.message
