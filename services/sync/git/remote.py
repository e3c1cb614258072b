"""Bring a ref of a remote repository into the source's bare clone (dulwich's smart-HTTP client).

The first fetch into an empty clone is the clone; later fetches send only new objects (the clone's
`refs/remotes/origin/sync` tells the server what is already here). Every request, redirects included,
passes the SSRF check first; dulwich attaches the credentials only to requests for the origin of the
URL they were given for, and urllib3 drops the Authorization header on a redirect to another host.
Runs in a worker thread (blocking I/O).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import urllib3
from dulwich.client import HTTPUnauthorized, get_transport_and_path_from_url
from dulwich.errors import GitProtocolError, NotGitRepository
from dulwich.objects import Commit
from dulwich.repo import Repo

from services.errors import InvalidArgument, PermissionDenied
from services.net.safety import address_class

logger = logging.getLogger(__name__)

TRACKING_REF = b"refs/remotes/origin/sync"
USER_AGENT = "Archivist-git/0.1 (dulwich)"


class FetchFailed(Exception):
    """A fetch that did not bring the ref (network, server, authentication); the message is safe to show."""


def check_hop(url: str, allow_private: bool) -> None:
    """Refuse a request to a non-http(s) URL, or to a host resolving to a non-public address."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise PermissionDenied(f"refusing to fetch {url[:200]}: only http(s) URLs", "Use an http(s) clone URL.")
    if allow_private:
        return
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise FetchFailed(f"cannot resolve host {parts.hostname!r}: {exc}") from None
    for info in infos:
        reason = address_class(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]))
        if reason:
            raise PermissionDenied(
                f"refusing to fetch {url[:200]}: {parts.hostname} resolves to a {reason} address",
                "Fetching from private, local and metadata addresses is disabled. If this host is trusted, "
                "set ARCHIVIST_GIT_ALLOW_PRIVATE=true.",
            )


class GuardedPoolManager(urllib3.PoolManager):
    """A urllib3 pool manager that checks every request URL, each redirect hop included (urllib3
    follows a redirect by calling `urlopen` again)."""

    def __init__(self, allow_private: bool, timeout: float) -> None:
        super().__init__(
            headers={"User-Agent": USER_AGENT},
            timeout=urllib3.Timeout(connect=min(timeout, 15.0), read=timeout),
            retries=urllib3.Retry(total=3, connect=2, read=0, redirect=5),
        )
        self.allow_private = allow_private

    def urlopen(self, method: str, url: str, redirect: bool = True, **kw: Any) -> Any:  # type: ignore[override]
        check_hop(url, self.allow_private)
        return super().urlopen(method, url, redirect=redirect, **kw)


def pick_ref(refs: Mapping[bytes, bytes | None], ref: str) -> bytes:
    """The sha the remote advertises for `ref` (HEAD, a full ref, a branch, else a tag)."""
    if ref == "HEAD" or ref.startswith("refs/"):
        candidates = [ref.encode()]
    else:
        candidates = [f"refs/heads/{ref}".encode(), f"refs/tags/{ref}".encode()]
    for name in candidates:
        sha = refs.get(name)
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


def fetch_ref(
    directory: Path,
    url: str,
    ref: str,
    credentials: tuple[str, str] | None,
    allow_private: bool,
    timeout: float,
) -> str:
    """Fetch `ref` of `url` into the bare clone at `directory`; returns the commit's hex sha."""
    repo = open_clone(directory)
    try:
        username, password = credentials if credentials else (None, None)
        client, path = get_transport_and_path_from_url(
            url,
            pool_manager=GuardedPoolManager(allow_private, timeout),
            username=username,
            password=password,
            quiet=True,
        )
        picked: list[bytes] = []

        def wants(refs: Mapping[bytes, bytes], depth: int | None = None) -> list[bytes]:
            sha = pick_ref(refs, ref)
            picked.append(sha)
            return [] if sha in repo.object_store else [sha]

        client.fetch(path, repo, determine_wants=wants)
        if not picked:
            raise FetchFailed(f"The server did not list the refs of {url[:200]}.")
        commit = peel_commit(repo, picked[-1])
        repo.refs[TRACKING_REF] = commit
        return commit.decode()
    except HTTPUnauthorized:
        hint = "the token in auth_env was refused" if credentials else "pass auth_env naming a token variable"
        raise FetchFailed(f"{url[:200]} needs authentication ({hint}).") from None
    except NotGitRepository:
        raise FetchFailed(f"{url[:200]} is not a git repository (or not found).") from None
    except (GitProtocolError, urllib3.exceptions.HTTPError, OSError) as exc:
        logger.info("git fetch of %s failed: %s", url, exc)
        raise FetchFailed(f"Fetching {url[:200]} failed: {exc}") from None
    finally:
        repo.close()


def peel_commit(repo: Repo, sha: bytes) -> bytes:
    """The commit a ref names (annotated tags peeled)."""
    obj = repo.object_store[sha]
    for _ in range(10):
        if isinstance(obj, Commit):
            return obj.id
        if obj.type_name != b"tag":
            break
        obj = repo.object_store[obj.object[1]]
    raise InvalidArgument("The ref does not name a commit.", "Pass a branch or tag that points at a commit.")
