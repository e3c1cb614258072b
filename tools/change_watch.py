"""Which resources each caller watches, and the polls that turn their changes into updates.

Every worker, in any process, writes to the same database, so changes are found by polling what is
subscribed: a document's content hash, a source's counts, a job's status and counters. An update is
published on the subscription bus (tools/subscriptions.py keeps each listener in its scope) when what a
read would return has changed.

Each caller (a token, a signed-in person, the local owner) is polled by a task of its own, started every
`interval` unless its previous poll is still running, so a caller watching many resources (within its
caps, tools/subscriptions.py) slows only its own updates, never another tenant's (issue 27: one listen
of 10,000 URIs made every tenant wait for the whole walk, 0.1 s became 20 s). A resource spelled
several ways (a document's `?offset=`) is read once per poll.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from mcp.server.subscriptions import ResourceUpdated

from services.access.scope import server_scope, use_scope
from services.core.errors import ServiceError
from tools.common import to_json

logger = logging.getLogger(__name__)

PREFIXES = {"archivist://documents/": "document", "archivist://sources/": "source", "archivist://jobs/": "job"}
POLL_SECONDS = 1.0
State = tuple[str, str]  # (source_id, fingerprint digest)


@dataclass(frozen=True)
class ScopedResourceUpdated(ResourceUpdated):
    """A resource update that names the source it belongs to, so the bus can keep it in scope."""

    source_id: str = ""


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


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class ChangeWatch:
    """The URIs each caller watches (counted per subscription) and one poll task per caller."""

    def __init__(self, runtime: Any, bus: Any) -> None:
        self.runtime = runtime
        self.bus = bus
        self.watched: dict[str, Counter[str]] = {}  # caller -> uri -> subscriptions
        self.total: Counter[str] = Counter()  # uri -> subscriptions, every caller's
        self.seen: dict[str, State] = {}  # uri -> its state at the last poll
        self.polls: dict[str, asyncio.Task[None]] = {}  # caller -> its running poll
        self.interval = POLL_SECONDS

    def add(self, caller: str, uris: Iterable[str]) -> None:
        uris = list(uris)
        self.watched.setdefault(caller, Counter()).update(uris)
        self.total.update(uris)

    def remove(self, caller: str, uris: Iterable[str]) -> None:
        held = self.watched.get(caller)
        if held is None:
            return
        uris = [u for u in uris if held[u] > 0]
        held.subtract(uris)
        self.total.subtract(uris)
        for uri in uris:
            if held[uri] <= 0:
                del held[uri]
            if self.total[uri] <= 0:
                del self.total[uri]
                self.seen.pop(uri, None)
        if not held:
            del self.watched[caller]

    @contextmanager
    def watching(self, caller: str, uris: list[str]) -> Iterator[None]:
        self.add(caller, uris)
        try:
            yield
        finally:
            self.remove(caller, uris)

    async def visible(self, uris: Iterable[str]) -> list[str]:
        """The URIs the entered (subscriber's) scope may read; their current state becomes the baseline."""
        app = await self.runtime.get()
        allowed, states = [], {}
        for uri in dict.fromkeys(uris):
            parsed = parse(uri)
            if parsed is not None and parsed not in states:
                states[parsed] = await state_of(app, *parsed)
            state = states.get(parsed) if parsed else None
            if state is not None:
                allowed.append(uri)
                self.seen.setdefault(uri, (state[0], digest(state[1])))
        return allowed

    async def poll(self, app: Any, caller: str) -> None:
        """Read what `caller` watches and publish what changed since the last poll (by anyone)."""
        spellings: dict[tuple[str, str], list[str]] = {}  # each resource once, however it is spelled
        for uri in list(self.watched.get(caller, ())):
            parsed = parse(uri)
            if parsed is not None:
                spellings.setdefault(parsed, []).append(uri)
        with use_scope(server_scope("subscriptions")):  # each update is scoped per listener by the bus
            for resource, uris in spellings.items():
                state = await state_of(app, *resource)
                for uri in uris:
                    await self.compare(uri, state)

    async def compare(self, uri: str, state: tuple[str, str] | None) -> None:
        if uri not in self.total:  # unsubscribed meanwhile
            return
        before = self.seen.get(uri)
        now = (state[0], digest(state[1])) if state else (before[0] if before else "", "gone")
        self.seen[uri] = now
        if before is not None and before != now:
            await self.bus.publish(ScopedResourceUpdated(uri=uri, source_id=now[0]))

    def tick(self) -> None:
        """Start a poll for every caller whose previous poll has finished."""
        app = self.runtime.ready()
        if app is None:
            return
        for caller in [c for c, task in self.polls.items() if task.done()]:
            del self.polls[caller]
        for caller in list(self.watched):
            if caller not in self.polls:
                self.polls[caller] = asyncio.create_task(self.poll_logged(app, caller), name=f"poll {caller}")

    async def poll_logged(self, app: Any, caller: str) -> None:
        try:
            await self.poll(app, caller)
        except Exception:  # never let the watch die: the next tick tries again
            logger.warning("subscription poll failed", exc_info=True)

    async def poll_once(self) -> None:
        """One round of polls for every caller, awaited (for tests and tools that want it done)."""
        self.tick()
        await asyncio.gather(*self.polls.values(), return_exceptions=True)

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                self.tick()
                try:
                    await asyncio.wait_for(stop.wait(), self.interval)
                except TimeoutError:
                    pass
        finally:
            for task in self.polls.values():
                task.cancel()
            await asyncio.gather(*self.polls.values(), return_exceptions=True)
