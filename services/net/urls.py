"""URL helpers for the crawler: normalisation, scope, include/exclude patterns, host keys.

Everything here is pure (no I/O) so the job runner can call it freely while it builds its frontier.
"""

from __future__ import annotations

import fnmatch
import posixpath
from typing import Literal
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

Scope = Literal["same-host", "same-domain", "under-path"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_GLOB_CHARS = frozenset("*?[")
# Characters left alone when re-quoting a path or query: RFC 3986 reserved + unreserved + "%".
_PATH_SAFE = "/%:@!$&'()*+,;=~-._"
_QUERY_SAFE = _PATH_SAFE + "?"
# Second-level labels that, under a two-letter country TLD, form a public suffix (co.uk, com.au, ...).
_SHORT_SECOND_LEVELS = frozenset({"co", "com", "net", "org", "gov", "edu", "ac", "ne", "or", "go", "gob"})


def _remove_dot_segments(path: str) -> str:
    """Remove "." and ".." segments (RFC 3986 section 5.2.4), keeping a trailing slash."""
    if "." not in path:
        return path
    trailing = path.endswith(("/", "/.", "/.."))
    output: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if len(output) > 1:
                output.pop()
        elif segment != ".":
            output.append(segment)
    result = "/".join(output)
    if not result.startswith("/"):
        result = "/" + result
    if trailing and not result.endswith("/"):
        result += "/"
    return result


def _format_host(host: str) -> str:
    """Bracket IPv6 literals so the host can go back into a netloc."""
    return f"[{host}]" if ":" in host else host


def normalize_url(url: str, base: str | None = None) -> str | None:
    """Return a canonical absolute http(s) URL, or None when the URL cannot be crawled.

    Resolves `url` against `base`, keeps only http/https, lower-cases scheme and host, drops the
    default port, user info and fragment, removes dot segments, turns an empty path into "/" and
    percent-encodes characters that are not allowed in a URL (existing escapes are kept). The query
    string is kept as is (not sorted).
    """
    if not url or not url.strip():
        return None
    candidate = url.strip()
    try:
        if base:
            candidate = urljoin(base.strip(), candidate)
        parts = urlsplit(candidate)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    netloc = _format_host(host)
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc = f"{netloc}:{port}"
    path = quote(_remove_dot_segments(parts.path or "/"), safe=_PATH_SAFE)
    query = quote(parts.query, safe=_QUERY_SAFE)
    return urlunsplit((scheme, netloc, path or "/", query, ""))


def host_key(url: str) -> str:
    """`scheme://host:port` (port always explicit) identifying one server, for throttling."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme, 0)
    except ValueError:
        port = 0
    return f"{scheme}://{_format_host(host)}:{port}"


def registrable_domain(host: str) -> str:
    """Approximate the registrable domain of `host` without a public-suffix list.

    The last two labels ("docs.example.com" -> "example.com"), or the last three when the TLD is a
    two-letter country code and the second-level label is a common short suffix such as co/com/org/ac
    ("www.example.co.uk" -> "example.co.uk"). IP addresses and single labels are returned unchanged.
    Hosting suffixes such as github.io are not known, so all their sites count as one domain.
    """
    host = host.lower().rstrip(".")
    labels = host.split(".")
    if ":" in host or labels[-1].isdigit() or len(labels) <= 2:
        return host
    if len(labels[-1]) == 2 and labels[-2] in _SHORT_SECOND_LEVELS:
        return ".".join(labels[-3:])
    return ".".join(labels[-2:])


def _directory_of(path: str) -> str:
    """The directory part of a URL path, with a trailing slash ("/docs/intro" -> "/docs/")."""
    if path.endswith("/"):
        return path
    directory = posixpath.dirname(path or "/")
    return directory if directory.endswith("/") else directory + "/"


def in_scope(url: str, start_url: str, scope: Scope) -> bool:
    """Whether `url` belongs to the crawl that started at `start_url`.

    - "same-host": the host name is the same (scheme and port may differ).
    - "same-domain": the registrable domain (see `registrable_domain`) is the same.
    - "under-path": same host, and the path starts with the start URL's directory path
      ("https://h/docs/intro" admits "https://h/docs/..." but not "https://h/blog/...").
    """
    target, start = urlsplit(url), urlsplit(start_url)
    target_host, start_host = (target.hostname or "").lower(), (start.hostname or "").lower()
    if not target_host or not start_host:
        return False
    if scope == "same-host":
        return target_host == start_host
    if scope == "same-domain":
        return registrable_domain(target_host) == registrable_domain(start_host)
    if scope == "under-path":
        return target_host == start_host and (target.path or "/").startswith(_directory_of(start.path or "/"))
    raise ValueError(f"unknown scope: {scope!r}")


def _pattern_matches(url: str, pattern: str) -> bool:
    """Match one include/exclude pattern; see `matches_patterns`."""
    if not any(char in _GLOB_CHARS for char in pattern):
        return pattern in url
    if "://" in pattern:
        return fnmatch.fnmatchcase(url, pattern)
    parts = urlsplit(url)
    path = parts.path or "/"
    path_and_query = f"{path}?{parts.query}" if parts.query else path
    return fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(path_and_query, pattern)


def matches_patterns(url: str, include: list[str] | None, exclude: list[str] | None) -> bool:
    """Whether `url` passes the include/exclude filters.

    A pattern with a glob character (`*`, `?`, `[`) is an fnmatch glob, case-sensitive, matched against
    the URL path or the path plus "?query" (or against the full URL when the pattern contains "://").
    A pattern without glob characters is a substring match against the full URL. Exclude wins over
    include; an empty or missing include list admits everything.
    """
    if exclude and any(_pattern_matches(url, pattern) for pattern in exclude):
        return False
    if not include:
        return True
    return any(_pattern_matches(url, pattern) for pattern in include)
