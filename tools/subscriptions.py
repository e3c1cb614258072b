"""Resource subscriptions: documents, sources and jobs, on both protocol eras, each within its scope and
within its caps.

- 2026-07-28: `subscriptions/listen` is the SDK's own `ListenHandler` (each stream buffers at most 1024
  events, then ends: a client that stops reading loses only its own stream). `listen()` below refuses a
  stream past the caps and drops the URIs the subscriber cannot read before handing the request on, so
  the acknowledgement names exactly what it will hear.
- Older clients: `resources/subscribe` / `resources/unsubscribe`, one `LegacySession` per client
  connection, sent by a task of its own from a queue that holds each URI at most once: a client that
  stops reading holds back only its own updates, and at most one per URI it watches. The session's
  subscriptions end with its connection.

Caps (issue 27): a listen stream or a legacy session watches at most ARCHIVIST_SUBSCRIPTIONS_PER_SESSION
URIs; one caller (a token, a signed-in person) at most ARCHIVIST_SUBSCRIPTIONS_PER_TOKEN over all of its
streams and sessions (an open stream counts at least one) and at most STREAMS_PER_TOKEN listen streams.
The local owner (stdio, an open loopback server) has the per-session cap only. Past a cap the request
is refused with RATE_LIMITED (JSON-RPC -32029) naming the setting.

Both kinds of subscriber listen on one `ScopedBus` (the SDK's in-memory bus), which remembers each
listener's scope and delivers an update only when that scope may read the resource's source. The
updates come from `ChangeWatch` (tools/change_watch.py), which polls each caller's subscriptions apart.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated, ServerEvent
from mcp.types import EmptyResult, SubscribeRequestParams, SubscriptionsListenRequestParams, UnsubscribeRequestParams

from services.access.job_limits import UNLIMITED_CALLERS
from services.access.scope import entered_scope
from services.core.errors import PermissionDenied, RateLimited, ServiceError
from tools import sdk_adapter
from tools.change_watch import ChangeWatch, ScopedResourceUpdated
from tools.common import rpc_error

logger = logging.getLogger(__name__)
STREAMS_PER_TOKEN = 10  # open subscriptions/listen streams per caller (a client needs one or two)
SESSION_KEY = "archivist.subscriptions"  # where a connection's LegacySession lives in its `state`


class ScopedBus(InMemorySubscriptionBus):
    """The SDK's in-process bus; each listener hears only the updates its subscriber's scope may read."""

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        scope = entered_scope()  # the subscriber's: listen and subscribe run inside the access gate

        def scoped(event: ServerEvent) -> None:
            if isinstance(event, ScopedResourceUpdated) and (scope is None or not scope.allows(event.source_id)):
                return
            listener(event)

        return super().subscribe(scoped)


class Quota:
    """How many URIs (and listen streams) each caller holds, against the caps."""

    def __init__(self, per_session: int, per_token: int, streams: int = STREAMS_PER_TOKEN) -> None:
        self.per_session = per_session
        self.per_token = per_token
        self.streams_cap = streams
        self.held: Counter[str] = Counter()
        self.streams: Counter[str] = Counter()

    @classmethod
    def from_settings(cls, settings: Any) -> Quota:
        return cls(int(settings.subscriptions_per_session), int(settings.subscriptions_per_token))

    def check_session(self, count: int) -> None:
        if count > self.per_session:
            raise RateLimited(
                f"A subscription session or listen stream may watch at most {self.per_session} resources "
                f"(ARCHIVIST_SUBSCRIPTIONS_PER_SESSION); this one would watch {count}.",
                "Watch fewer resources: a source's URI covers its documents' counts.",
                retryable=False,
            )

    def take(self, caller: str, count: int, stream: bool = False) -> None:
        if caller in UNLIMITED_CALLERS:
            return
        if stream and self.streams[caller] >= self.streams_cap:
            raise RateLimited(
                f"This token already has {self.streams[caller]} open listen streams, the most allowed.",
                "Close a subscriptions/listen stream first, or watch more resources on one stream.",
            )
        if self.held[caller] + count > self.per_token:
            raise RateLimited(
                f"This token already watches {self.held[caller]} resources; it may watch at most "
                f"{self.per_token} (ARCHIVIST_SUBSCRIPTIONS_PER_TOKEN), and this asks for {count} more.",
                "Unsubscribe from resources, or close a listen stream, first.",
            )
        self.held[caller] += count
        self.streams[caller] += int(stream)

    def give_back(self, caller: str, count: int, stream: bool = False) -> None:
        if caller in UNLIMITED_CALLERS:
            return
        self.held[caller] -= count
        self.streams[caller] -= int(stream)
        for counter in (self.held, self.streams):
            if counter[caller] <= 0:
                del counter[caller]


def caller_key() -> str:
    """The subscriber: its entered scope's `who` (a token's name, a signed-in person, the local owner)."""
    scope = entered_scope()
    if scope is None:  # every subscription request passes the access gate; without a scope, none
        raise rpc_error(PermissionDenied("No caller.", "Subscribe through the server's access gate."))
    return scope.who


class LegacySession:
    """One connection's resources/subscribe subscriptions, and the task that sends their updates."""

    def __init__(self, legacy: LegacySubscriptions, caller: str, session: Any) -> None:
        self.legacy = legacy
        self.caller = caller
        self.session = session
        self.uris: set[str] = set()
        self.queued: set[str] = set()  # each URI waits at most once: the queue never outgrows `uris`
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.unsubscribe = legacy.watch.bus.subscribe(self.deliver)  # in the subscriber's scope
        self.sender = asyncio.get_running_loop().create_task(self.send(), name="resources/updated sender")
        self.closed = False

    def deliver(self, event: ServerEvent) -> None:
        if isinstance(event, ResourceUpdated) and event.uri in self.uris and event.uri not in self.queued:
            self.queued.add(event.uri)
            self.queue.put_nowait(event.uri)

    async def send(self) -> None:
        while True:
            uri = await self.queue.get()
            self.queued.discard(uri)
            try:
                await self.session.send_resource_updated(uri)
            except Exception:  # the client has gone
                self.close()
                return

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.unsubscribe()
        self.sender.cancel()
        self.legacy.watch.remove(self.caller, self.uris)
        self.legacy.quota.give_back(self.caller, len(self.uris))
        self.uris.clear()


class LegacySubscriptions:
    """resources/subscribe for clients before 2026-07-28: one LegacySession per connection."""

    def __init__(self, watch: ChangeWatch, quota: Quota) -> None:
        self.watch = watch
        self.quota = quota

    def session_for(self, ctx: Any, caller: str) -> LegacySession:
        connection = sdk_adapter.connection_of(ctx)
        held: LegacySession | None = connection.state.get(SESSION_KEY)
        if held is None or held.closed:
            held = LegacySession(self, caller, ctx.session)
            connection.state[SESSION_KEY] = held
            connection.exit_stack.callback(held.close)
        return held

    async def subscribe(self, ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
        from mcp.server.mcpserver.exceptions import ResourceNotFoundError

        uri = str(params.uri)
        caller = caller_key()
        session = self.session_for(ctx, caller)
        if uri in session.uris:
            return EmptyResult()
        try:
            self.quota.check_session(len(session.uris) + 1)
            self.quota.take(caller, 1)
        except ServiceError as exc:
            raise rpc_error(exc) from None
        try:
            visible = await self.watch.visible([uri])
        except BaseException:
            self.quota.give_back(caller, 1)
            raise
        if not visible or session.closed:
            self.quota.give_back(caller, 1)
            raise ResourceNotFoundError(f"Unknown resource: {uri}")
        session.uris.add(uri)
        self.watch.add(caller, [uri])
        return EmptyResult()

    async def unsubscribe(self, ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
        session = sdk_adapter.connection_of(ctx).state.get(SESSION_KEY)
        uri = str(params.uri)
        if session is not None and uri in session.uris:
            session.uris.discard(uri)
            self.watch.remove(session.caller, [uri])
            self.quota.give_back(session.caller, 1)
        return EmptyResult()


def install(server: Any, runtime: Any, bus: ScopedBus) -> ChangeWatch:
    """Serve resources/subscribe (older clients) and keep subscriptions/listen (the SDK's) in scope and
    within the caps."""
    watch = ChangeWatch(runtime, bus)
    quota = Quota.from_settings(runtime.settings)
    legacy = LegacySubscriptions(watch, quota)
    sdk_adapter.serve(server, "resources/subscribe", SubscribeRequestParams, legacy.subscribe)
    sdk_adapter.serve(server, "resources/unsubscribe", UnsubscribeRequestParams, legacy.unsubscribe)
    entry = sdk_adapter.request_handler(server, "subscriptions/listen")
    if entry is not None:
        sdk_listen = entry.handler

        async def listen(ctx: Any, params: SubscriptionsListenRequestParams) -> Any:
            wanted = list(dict.fromkeys(params.notifications.resource_subscriptions or []))
            caller = caller_key()
            try:
                quota.check_session(len(wanted))  # before any look-up: a huge list costs nothing
                quota.take(caller, max(1, len(wanted)), stream=True)
            except ServiceError as exc:
                raise rpc_error(exc) from None
            held = max(1, len(wanted))
            try:
                allowed = await watch.visible(wanted)
                quota.give_back(caller, held - max(1, len(allowed)))  # what it may not read is not held
                held = max(1, len(allowed))
                notifications = params.notifications.model_copy(update={"resource_subscriptions": allowed or None})
                with watch.watching(caller, allowed):
                    return await sdk_listen(ctx, params.model_copy(update={"notifications": notifications}))
            finally:
                quota.give_back(caller, held, stream=True)

        sdk_adapter.serve(server, "subscriptions/listen", SubscriptionsListenRequestParams, listen)
    return watch
