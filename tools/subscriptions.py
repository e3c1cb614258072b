"""Resource subscriptions: documents, sources and jobs, on both protocol eras, each within its scope.

- 2026-07-28: `subscriptions/listen` is the SDK's own `ListenHandler`; `listen()` below only drops the
  URIs the subscriber cannot read before handing the request on, so the acknowledgement names exactly
  what it will hear.
- Older clients: `resources/subscribe` / `resources/unsubscribe` (`subscribe()` / `unsubscribe()`),
  delivered with the session's `send_resource_updated`.

Both kinds of subscriber listen on one `ScopedBus` (the SDK's in-memory bus), which remembers each
listener's scope and delivers an update only when that scope may read the resource's source. The
updates come from `ChangeWatch`, which polls the subscribed resources (every worker, in any process,
writes to the same database) and publishes an update when what a read would return has changed: a
document's content hash, a source's counts, a job's status and counters.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated, ServerEvent
from mcp.types import EmptyResult, SubscribeRequestParams, SubscriptionsListenRequestParams, UnsubscribeRequestParams

from services.access.scope import Scope, entered_scope, use_scope
from services.errors import ServiceError
from tools.common import to_json

logger = logging.getLogger(__name__)

PREFIXES = {"archivist://documents/": "document", "archivist://sources/": "source", "archivist://jobs/": "job"}
POLL_SECONDS = 1.0


@dataclass(frozen=True)
class ScopedResourceUpdated(ResourceUpdated):
    """A resource update that names the source it belongs to, so the bus can keep it in scope."""

    source_id: str = ""


class ScopedBus(InMemorySubscriptionBus):
    """The SDK's in-process bus; each listener hears only the updates its subscriber's scope may read."""

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        scope = entered_scope()  # the subscriber's: listen and subscribe run inside the access gate

        def scoped(event: ServerEvent) -> None:
            if isinstance(event, ScopedResourceUpdated) and (scope is None or not scope.allows(event.source_id)):
                return
            listener(event)

        return super().subscribe(scoped)


def parse(uri: str) -> tuple[str, str] | None:
    """(kind, id) of an Archivist resource URI (a document's ?offset is ignored), else None."""
    for prefix, kind in PREFIXES.items():
        if uri.startswith(prefix):
            ident = uri[len(prefix) :].split("?", 1)[0]
            return (kind, ident) if ident else None
    return None


async def state_of(app: Any, kind: str, ident: str) -> tuple[str, str] | None:
    """(source_id, fingerprint) of a resource as the entered scope sees it; None when it cannot be read."""
    try:
        if kind == "document":
            document = await app.documents.get(ident)
            return str(document.source_id), f"{document.content_hash}:{document.updated_at.isoformat()}"
        if kind == "source":
            source = await app.sources.get(ident)
            stats = await app.sources.stats(source.id)
            return str(source.id), to_json({**source.model_dump(mode="json"), **stats.model_dump(mode="json")})
        job = await app.jobs.get(ident)
        return str(job.source_id), to_json(job.model_dump(mode="json", exclude={"heartbeat_at", "worker_id"}))
    except ServiceError:
        return None


class ChangeWatch:
    """Which URIs are subscribed (counted per subscription), and the poll that turns changes into updates."""

    def __init__(self, runtime: Any, bus: ScopedBus) -> None:
        self.runtime = runtime
        self.bus = bus
        self.watched: Counter[str] = Counter()
        self.seen: dict[str, tuple[str, str]] = {}  # uri -> (source_id, fingerprint hash)
        self.interval = POLL_SECONDS

    def add(self, uris: Iterable[str]) -> None:
        self.watched.update(uris)

    def remove(self, uris: Iterable[str]) -> None:
        self.watched.subtract(uris)
        for uri in [u for u, n in self.watched.items() if n <= 0]:
            del self.watched[uri]
            self.seen.pop(uri, None)

    @contextmanager
    def watching(self, uris: list[str]) -> Iterator[None]:
        self.add(uris)
        try:
            yield
        finally:
            self.remove(uris)

    async def visible(self, uris: Iterable[str]) -> list[str]:
        """The URIs the entered (subscriber's) scope may read; their current state becomes the baseline."""
        app = await self.runtime.get()
        allowed = []
        for uri in dict.fromkeys(uris):
            parsed = parse(uri)
            state = await state_of(app, *parsed) if parsed else None
            if state is not None:
                allowed.append(uri)
                self.seen.setdefault(uri, (state[0], digest(state[1])))
        return allowed

    async def poll_once(self) -> None:
        app = self.runtime.ready()
        if app is None or not self.watched:
            return
        with use_scope(Scope.owner("subscriptions")):  # each update is scoped per listener by the bus
            for uri in list(self.watched):
                parsed = parse(uri)
                if parsed is None:
                    continue
                state = await state_of(app, *parsed)
                before = self.seen.get(uri)
                now = (state[0], digest(state[1])) if state else (before[0] if before else "", "gone")
                if before is not None and before != now and uri in self.watched:
                    await self.bus.publish(ScopedResourceUpdated(uri=uri, source_id=now[0]))
                if uri in self.watched:
                    self.seen[uri] = now

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.poll_once()
            except Exception:  # never let the watch die: the next poll tries again
                logger.warning("subscription poll failed", exc_info=True)
            try:
                await asyncio.wait_for(stop.wait(), self.interval)
            except TimeoutError:
                pass


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class LegacySubscriptions:
    """resources/subscribe for clients before 2026-07-28: one bus listener per session."""

    def __init__(self, watch: ChangeWatch) -> None:
        self.watch = watch
        self.sessions: dict[int, tuple[set[str], Callable[[], None]]] = {}
        self.sending: set[asyncio.Task[None]] = set()  # held until done (the loop keeps only weak refs)

    async def subscribe(self, ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
        from mcp.server.mcpserver.exceptions import ResourceNotFoundError

        uri = str(params.uri)
        if not await self.watch.visible([uri]):
            raise ResourceNotFoundError(f"Unknown resource: {uri}")
        session = ctx.session
        key = id(session)
        if key not in self.sessions:
            uris: set[str] = set()
            loop = asyncio.get_running_loop()

            def deliver(event: ServerEvent) -> None:
                if isinstance(event, ResourceUpdated) and event.uri in uris:
                    task = loop.create_task(self.send(key, session, event.uri))
                    self.sending.add(task)
                    task.add_done_callback(self.sending.discard)

            self.sessions[key] = (uris, self.watch.bus.subscribe(deliver))
        uris = self.sessions[key][0]
        if uri not in uris:
            uris.add(uri)
            self.watch.add([uri])
        return EmptyResult()

    async def unsubscribe(self, ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
        entry = self.sessions.get(id(ctx.session))
        uri = str(params.uri)
        if entry is not None and uri in entry[0]:
            entry[0].discard(uri)
            self.watch.remove([uri])
        return EmptyResult()

    async def send(self, key: int, session: Any, uri: str) -> None:
        try:
            await session.send_resource_updated(uri)
        except Exception:  # the session has gone: forget its subscriptions
            self.drop(key)

    def drop(self, key: int) -> None:
        entry = self.sessions.pop(key, None)
        if entry is not None:
            entry[1]()
            self.watch.remove(entry[0])


def install(server: Any, runtime: Any, bus: ScopedBus) -> ChangeWatch:
    """Serve resources/subscribe (older clients) and keep subscriptions/listen (the SDK's) in scope."""
    lowlevel = server._lowlevel_server
    watch = ChangeWatch(runtime, bus)
    legacy = LegacySubscriptions(watch)
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, legacy.subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, legacy.unsubscribe)
    entry = lowlevel.get_request_handler("subscriptions/listen")
    if entry is not None:
        sdk_listen = entry.handler

        async def listen(ctx: Any, params: SubscriptionsListenRequestParams) -> Any:
            wanted = params.notifications.resource_subscriptions or []
            allowed = await watch.visible(wanted)
            notifications = params.notifications.model_copy(update={"resource_subscriptions": allowed or None})
            with watch.watching(allowed):
                return await sdk_listen(ctx, params.model_copy(update={"notifications": notifications}))

        lowlevel.add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, listen)
    return watch
