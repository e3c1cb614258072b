"""`X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` on `/mcp` responses (the chat
module's headers), for a caller that has a rate bucket (a token, an identity-provider sign-in, the
local owner when ARCHIVIST_LOCAL_RATE_PER_MINUTE is set).

Limit is the caller's calls per minute, Remaining the calls it may make at once now (at most the burst,
ARCHIVIST_RATE_BURST), Reset the Unix time in seconds when its bucket is full again. The bucket is read
(never taken from: access/guard.py takes the one call) when the response starts; a POST's start is held
until its first body message, so a streamed reply tells the bucket after its own call was taken. Reading
the bucket never fails a response: without an answer the headers are left out."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Send
from starlette.types import Scope as AsgiScope

from access.guard import caller_of
from services.access.identity import rate_bucket

if TYPE_CHECKING:
    from access.guard import GuardedServer

logger = logging.getLogger(__name__)


class RateLimitHeaders:
    """ASGI wrapper of the /mcp route (installed by access/http_app.py)."""

    def __init__(self, app: ASGIApp, server: GuardedServer) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        caller = caller_of(self.server.profiles, Request(scope))  # in the request's own auth context
        held: list[Message] = []
        hold = scope.get("method") == "POST"

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                if hold:
                    held.append(message)
                    return
                message = await self.stamped(message, caller)
            elif held:
                await send(await self.stamped(held.pop(), caller))
            await send(message)

        await self.app(scope, receive, with_headers)
        if held:  # a start with no body message (not sent by Starlette's responses, but legal ASGI)
            await send(await self.stamped(held.pop(), caller))

    async def stamped(self, start: Message, caller: Any) -> Message:
        """The response start with the caller's X-RateLimit-* headers (unchanged when it has no bucket,
        the reply is an authentication refusal, or the bucket cannot be read)."""
        app = self.server.runtime.ready()
        if app is None or start.get("status") in (401, 403):
            return start
        bucket = rate_bucket(caller, app.settings)
        if bucket is None:
            return start
        try:
            state = await app.ratelimit.peek(*bucket)
        except Exception:
            logger.debug("rate bucket not read for the X-RateLimit headers", exc_info=True)
            return start
        headers = [
            *start.get("headers", []),
            (b"x-ratelimit-limit", str(state.limit).encode()),
            (b"x-ratelimit-remaining", str(state.remaining).encode()),
            (b"x-ratelimit-reset", str(state.reset).encode()),
        ]
        return {**start, "headers": headers}
