"""What RFC 7662 introspection said of admitted tokens (services/access/oauth.py), kept briefly so a
session does not ask the issuer on every request.

An entry lives at most `max_seconds` (ARCHIVIST_OAUTH_INTROSPECTION_CACHE_SECONDS, 60 by default;
0 turns the cache off) and never past the token's own `exp`, so a token revoked at the issuer keeps
working here for at most that long. At most `max_entries` tokens are kept, the least recently used
leaving first. Only answers that admitted a token are kept: a refusal asks the issuer again next time,
so a token is never locked out by an answer given before it became active, and random bearer strings
(which a negative cache could not stop anyway) cannot push the admitted tokens out. Tokens are keyed
by their SHA-256: the bearer secret itself is not held after its request.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
MAX_ENTRIES = 1024


class TokenCache(Generic[T]):
    """A value per bearer token (an `Identity`), until the entry's time or the token's `exp`."""

    def __init__(
        self,
        max_seconds: float,
        max_entries: int = MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.max_seconds = max_seconds
        self.max_entries = max_entries
        self._clock = clock  # for the entry's lifetime
        self._wall = wall  # for the token's `exp` (seconds since the epoch)
        self._entries: OrderedDict[bytes, tuple[float, T]] = OrderedDict()

    def get(self, token: str) -> T | None:
        """What was kept for `token`, while its entry lasts; else None."""
        key = _key(token)
        entry = self._entries.get(key)
        if entry is None:
            return None
        until, value = entry
        if self._clock() >= until:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def put(self, token: str, value: T, expires_at: float | None) -> None:
        """Keep `value` for up to `max_seconds`, never past `expires_at` (the token's `exp`, if any)."""
        ttl = self.max_seconds
        if expires_at is not None:
            ttl = min(ttl, expires_at - self._wall())
        if ttl <= 0:
            return
        key = _key(token)
        self._entries[key] = (self._clock() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)


def _key(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()
