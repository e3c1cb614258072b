"""What a git source follows (its binding), the checks its arguments pass, and its documents' URLs.

The token of a private repository is read from the environment variable named by `auth_env` when a
fetch runs, through the secret gate (services/access/secret_gate.py: never a server variable, and an
unlisted one only for the local owner); only the variable's name is ever stored, shown or logged.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from urllib.parse import quote, urlsplit
from uuid import UUID

from dulwich.refs import Ref, check_ref_format

from services.access.paths import SKIPPED_DIRS
from services.access.secret_gate import secret_value
from services.core.errors import InvalidArgument
from services.sync.scan import FolderConfig

#: The username sent with a token that is not written "user:token" (GitHub, GitLab and Gitea
#: accept any username with a personal access token).
TOKEN_USERNAME = "x-access-token"
MAX_URL_LENGTH = 2000
#: Upper case only: a token pasted by mistake (ghp_..., glpat-...) is refused without being echoed.
ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
URL_HINT = "Pass the repository's http(s) clone URL, e.g. 'https://github.com/org/repo.git'."


@dataclass(frozen=True)
class GitConfig:
    """A source bound to a repository: which ref and files it follows, and how far it got."""

    source_id: UUID
    url: str
    ref: str = "HEAD"
    include_patterns: list[str] = field(default_factory=list)
    exclude_patterns: list[str] = field(default_factory=list)
    auth_env: str | None = None
    browse_url: str | None = None
    last_commit: str | None = None
    last_patterns: str | None = None
    syncing_commit: str | None = None
    last_synced_at: datetime | None = None

    @property
    def patterns(self) -> FolderConfig:
        """The include/exclude rules, as folder sources apply them (globs on the repository path)."""
        return FolderConfig(self.source_id, "", self.include_patterns, self.exclude_patterns, True)

    def patterns_key(self) -> str:
        """Names the patterns in force: a sync under other patterns compares every file."""
        return json.dumps([self.include_patterns, self.exclude_patterns])

    def document_url(self, commit: str, path: str) -> str:
        """The browse-URL template filled in, else `git+<url>@<commit>#<path>`."""
        quoted = quote(path, safe="/")
        if self.browse_url:
            return self.browse_url.replace("{commit}", commit).replace("{path}", quoted).replace("{ref}", self.ref)
        return f"git+{self.url}@{commit}#{quoted}"

    def directory(self, data_dir: Path) -> Path:
        """Where the source's bare clone lives."""
        return Path(data_dir) / "git" / str(self.source_id)

    def summary(self) -> dict[str, object]:
        """What sources.metadata shows of the binding (manage_source get): never a secret."""
        return {
            "kind": "git",
            "origin": self.url,
            "ref": self.ref,
            "last_synced_commit": self.last_commit,
            "last_synced_at": self.last_synced_at.isoformat() if self.last_synced_at else None,
            "auth_env": self.auth_env,
            "browse_url": self.browse_url,
        }


def hidden(path: str) -> bool:
    """Hidden files and tool folders are skipped, as in folder sources."""
    return any(part.startswith(".") or part in SKIPPED_DIRS for part in path.split("/"))


def check_git_url(url: str | None) -> str:
    """An http(s) clone URL without credentials in it."""
    if not url or not str(url).strip():
        raise InvalidArgument("git_url is required.", URL_HINT)
    url = str(url).strip()
    if len(url) > MAX_URL_LENGTH or any(c.isspace() for c in url):
        raise InvalidArgument("git_url is not a valid URL.", URL_HINT)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise InvalidArgument(f"git_url is not a valid URL: {exc}", URL_HINT) from None
    if parts.username is not None or parts.password is not None:
        raise InvalidArgument(
            "git_url must not carry credentials.",
            "Put the token in an environment variable of the server and pass its name as auth_env.",
        )
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise InvalidArgument(f"git_url must be an http(s) URL (got {url[:200]!r}).", URL_HINT)
    if parts.query or parts.fragment:  # a query may carry a token (?private_token=...): never stored
        raise InvalidArgument("git_url must not have a ?query or #fragment.", URL_HINT)
    return url


def check_ref(ref: str | None) -> str:
    """A branch or tag name, a full ref (refs/...), or HEAD (the remote's default branch; the default)."""
    if ref is None or not str(ref).strip():
        return "HEAD"
    ref = str(ref).strip()
    full = ref if ref.startswith("refs/") else f"refs/heads/{ref}"
    if ref != "HEAD" and (len(ref) > 250 or not check_ref_format(Ref(full.encode()))):
        raise InvalidArgument(f"Invalid git ref {ref[:200]!r}.", "Pass a branch or tag name such as 'main' or 'v2.1'.")
    return ref


def check_auth_env(name: str | None) -> str | None:
    """The name of an environment variable holding a token; it must be set now."""
    if name is None or not str(name).strip():
        return None
    name = str(name).strip()
    if not ENV_NAME.fullmatch(name):
        raise InvalidArgument(
            "auth_env must be the NAME of an environment variable (upper-case letters, digits, underscore).",
            "Pass e.g. auth_env='GITLAB_TOKEN', never the token itself.",
        )
    read_credentials(name)
    return name


def read_credentials(name: str | None) -> tuple[str, str] | None:
    """(username, token) from the variable `name` ("user:token" or a bare token), read through the
    secret gate for the current caller; InvalidArgument naming the variable when it is not set. The
    value never appears in a message."""
    if name is None:
        return None
    value = secret_value(name, "auth_env")
    user, sep, secret = value.partition(":")
    return (user, secret) if sep and user and secret else (TOKEN_USERNAME, value)


def check_browse_url(template: str | None) -> str | None:
    """An http(s) URL template with {path} (and usually {commit}) for documents' web URLs."""
    if template is None or not str(template).strip():
        return None
    template = str(template).strip()
    hint = "Pass e.g. browse_url='https://github.com/org/repo/blob/{commit}/{path}'."
    if "{path}" not in template or len(template) > MAX_URL_LENGTH:
        raise InvalidArgument("browse_url must contain {path}.", hint)
    sample = template.replace("{commit}", "0" * 40).replace("{path}", "a").replace("{ref}", "main")
    if urlsplit(sample).scheme.lower() not in ("http", "https") or not urlsplit(sample).hostname:
        raise InvalidArgument("browse_url must be an http(s) URL template.", hint)
    return template


def default_title(url: str, ref: str) -> str:
    """`org/repo` from the URL (with the ref when one was chosen)."""
    path = urlsplit(url).path.strip("/").removesuffix(".git")
    name = "/".join(path.split("/")[-2:]) or urlsplit(url).hostname or url
    return name if ref == "HEAD" else f"{name} ({ref})"
