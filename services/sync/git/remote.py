"""Bring a ref of a remote repository into the source's bare clone (dulwich's smart-HTTP client).

The first fetch into an empty clone is the clone; later fetches send only new objects (the clone's
`refs/remotes/origin/sync` tells the server what is already here). Every connection, redirect hops and
retries included, goes through the one connector (`services.net.connector.PinnedPoolManager`): the
host is resolved once, every address checked, and the connection made to a checked address, so DNS
rebinding cannot walk past ARCHIVIST_GIT_ALLOW_PRIVATE=false. dulwich attaches the credentials only to
requests for the origin of the URL they were given for, and urllib3 drops the Authorization header on
a redirect to another host. The pack is counted as it arrives and the fetch stops at
ARCHIVIST_GIT_MAX_PACK_MB, before anything is stored; it is received into a file and landed by
services/sync/git/packs.py in the limited parser pool (services/parsers/isolation.py), which inflates
nothing over the file cap (dulwich's own `fetch` would inflate every object whole) and resolves deltas
within a bounded base cache; a miscount there costs a worker process, not the server. The network part
runs in a worker thread (blocking I/O).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from dulwich.client import HTTPUnauthorized, Urllib3HttpGitClient
from dulwich.errors import GitProtocolError, NotGitRepository
from dulwich.objects import Commit, ObjectID, Tag
from dulwich.refs import Ref
from dulwich.repo import Repo

from services.core.budgets import budget
from services.core.errors import InvalidArgument
from services.net.connector import CONNECTION_ERRORS, PinnedPoolManager, urllib3_timeout
from services.parsers.isolation import ParserPool
from services.sync.git.objects import object_key
from services.sync.git.packs import incoming_pack, land_pack

logger = logging.getLogger(__name__)

TRACKING_REF = Ref(b"refs/remotes/origin/sync")
FETCH_ERRORS: tuple[type[Exception], ...] = (GitProtocolError, *CONNECTION_ERRORS)
USER_AGENT = "Archivist-git/0.1 (dulwich)"
MB = 1024 * 1024


class FetchFailed(Exception):
    """A fetch that did not bring the ref (network, server, authentication); the message is safe to show."""


class PackTooLarge(FetchFailed):
    """The server sent more pack bytes than ARCHIVIST_GIT_MAX_PACK_MB allows."""


class BoundedGitClient(Urllib3HttpGitClient):
    """dulwich's smart-HTTP client, connected only through the connector, whose pack stops at a
    byte budget while it is received (nothing of it is stored: dulwich aborts the pack)."""

    def __init__(
        self, url: str, *, pool_manager: PinnedPoolManager, max_pack_bytes: int, credentials: tuple[str, str] | None
    ) -> None:
        if not isinstance(pool_manager, PinnedPoolManager):  # the one connector, or no fetch
            raise TypeError("git fetches connect only through services.net.connector.PinnedPoolManager")
        username, password = credentials if credentials else (None, None)
        super().__init__(url, pool_manager=pool_manager, username=username, password=password, quiet=True)
        self.max_pack_bytes = max_pack_bytes

    def _discover_references(self, *args: Any, **kw: Any) -> Any:
        """The remote's refs; a server that is not a git smart-HTTP server is refused here, before any
        object: dulwich's "dumb HTTP" fallback downloads whole packs into memory, past the budget."""
        found = super()._discover_references(*args, **kw)
        if self.dumb:
            raise FetchFailed(
                f"{self._base_url[:200]} answered as a plain web server, not git's smart HTTP protocol "
                "(dumb HTTP is not fetched). Use the repository's clone URL on a git server."
            )
        return found

    def fetch_pack(
        self,
        path: Any,
        determine_wants: Any,
        graph_walker: Any,
        pack_data: Callable[[bytes], Any],
        *args: Any,
        **kw: Any,
    ) -> Any:
        received = 0

        def bounded(chunk: bytes) -> Any:
            nonlocal received
            received += len(chunk)
            if received > self.max_pack_bytes:
                raise PackTooLarge(
                    f"The repository sent more than {self.max_pack_bytes // MB} MB of objects "
                    "(ARCHIVIST_GIT_MAX_PACK_MB); the fetch was stopped and nothing was stored. Follow a smaller "
                    "repository, or ask the operator to raise ARCHIVIST_GIT_MAX_PACK_MB."
                )
            return pack_data(chunk)

        return super().fetch_pack(path, determine_wants, graph_walker, bounded, *args, **kw)


def pick_ref(refs: Mapping[Ref, ObjectID | None], ref: str) -> bytes:
    """The sha the remote advertises for `ref` (HEAD, a full ref, a branch, else a tag)."""
    if ref == "HEAD" or ref.startswith("refs/"):
        candidates = [ref.encode()]
    else:
        candidates = [f"refs/heads/{ref}".encode(), f"refs/tags/{ref}".encode()]
    for name in candidates:
        sha = refs.get(Ref(name))
        if sha:
            return sha
    raise InvalidArgument(
        f"The repository has no ref {ref!r}.",
        "Pass an existing branch or tag as ref (or leave ref out for the default branch).",
    )


def open_clone(directory: Path) -> Repo:
    """The source's bare clone, created empty on first use."""
    if (directory / "objects").is_dir():
        return Repo(str(directory))
    directory.mkdir(parents=True, exist_ok=True)
    return Repo.init_bare(str(directory))


def git_client(
    url: str, credentials: tuple[str, str] | None, allow_private: bool, timeout: float, max_pack_bytes: int
) -> BoundedGitClient:
    """The client for one fetch: pinned connections, a pack budget, the token for `url`'s origin only."""
    pool = PinnedPoolManager(
        allow_private=allow_private, headers={"User-Agent": USER_AGENT}, timeout=urllib3_timeout(timeout)
    )
    return BoundedGitClient(url, pool_manager=pool, max_pack_bytes=max_pack_bytes, credentials=credentials)


@dataclass(frozen=True)
class Fetch:
    """One fetch of a ref into a source's bare clone, and the limits it runs under."""

    directory: Path
    url: str
    ref: str
    credentials: tuple[str, str] | None
    allow_private: bool
    timeout: float
    max_pack_bytes: int
    max_object_bytes: int


async def fetch_ref(fetch: Fetch, pool: ParserPool) -> str:
    """Fetch `fetch.ref` into the bare clone; returns the commit's hex sha. The pack is received in a
    thread and landed in the limited parser pool (`pool`): objects over `max_object_bytes` are stored
    without being inflated (a sync reports their files as too large); OverBudget when the pack inflates
    past its budget or its deltas cannot be resolved within theirs, and then nothing is stored."""
    repo = await asyncio.to_thread(open_clone, fetch.directory)
    try:
        with incoming_pack(repo.object_store) as received:
            picked = await asyncio.to_thread(receive_pack, repo, fetch, received)
            received.flush()
            if received.tell():
                name = f"the pack fetched from {fetch.url[:200]}"
                await pool.run(budget("git-pack"), name, land_pack, received.name, fetch.max_object_bytes)
    finally:
        repo.close()
    return await asyncio.to_thread(track, fetch.directory, picked)


def receive_pack(repo: Repo, fetch: Fetch, into: IO[bytes]) -> bytes:
    """Receive what the clone lacks of `fetch.ref` into `into`; returns the sha the remote names."""
    url = fetch.url
    try:
        client = git_client(url, fetch.credentials, fetch.allow_private, fetch.timeout, fetch.max_pack_bytes)
        picked: list[bytes] = []

        def wants(refs: Mapping[Ref, ObjectID], depth: int | None = None) -> list[ObjectID]:
            sha = ObjectID(pick_ref(refs, fetch.ref))
            picked.append(sha)
            return [] if sha in repo.object_store else [sha]

        client.fetch_pack(urlsplit(url).path, wants, repo.get_graph_walker(), into.write)
        if not picked:
            raise FetchFailed(f"The server did not list the refs of {url[:200]}.")
        return picked[-1]
    except HTTPUnauthorized:
        hint = "the token in auth_env was refused" if fetch.credentials else "pass auth_env naming a token variable"
        raise FetchFailed(f"{url[:200]} needs authentication ({hint}).") from None
    except NotGitRepository:
        raise FetchFailed(f"{url[:200]} is not a git repository (or not found).") from None
    except FETCH_ERRORS as exc:
        logger.info("git fetch of %s failed: %s", url, exc)
        raise FetchFailed(f"Fetching {url[:200]} failed: {exc}") from None


def track(directory: Path, picked: bytes) -> str:
    """Point the clone's tracking ref at the commit `picked` names (the clone opened again: the pack
    was landed by another process)."""
    repo = open_clone(directory)
    try:
        commit = peel_commit(repo, picked)
        repo.refs[TRACKING_REF] = ObjectID(commit)
        return commit.decode()
    finally:
        repo.close()


def peel_commit(repo: Repo, sha: bytes) -> bytes:
    """The commit a ref names (annotated tags peeled)."""
    obj = repo.object_store[object_key(sha)]
    for _ in range(10):
        if isinstance(obj, Commit):
            return obj.id
        if not isinstance(obj, Tag):
            break
        obj = repo.object_store[obj.object[1]]
    raise InvalidArgument("The ref does not name a commit.", "Pass a branch or tag that points at a commit.")
