"""File access limited to ARCHIVIST_ALLOWED_PATHS (after resolving `..` and symlinks).

Hidden components below an allowed root (.env, .git/, .ssh/) are refused whether a file is named
directly or found by walking, and the check is repeated on the file actually opened. A caller confined
to profiles reads only under its profiles' allowed paths that lie inside those roots (`caller_roots`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from services.access.scope import current_scope
from services.core.errors import InvalidArgument, NotFound, PermissionDenied

SERVER_SETTING = "the server's ARCHIVIST_ALLOWED_PATHS setting"
PROFILE_SETTING = "the allowed paths of your profiles"
SKIPPED_DIRS = {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache", ".tox"}


def allowed_roots(allowed: list[Path]) -> list[Path]:
    return [Path(p).expanduser().resolve() for p in allowed]


def is_within(path: Path, roots: list[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def caller_roots(server: list[Path]) -> tuple[list[Path], str]:
    """The roots the current caller may read files under, and the setting that names them.

    The local owner and jobs (scope.allowed_paths None) get the server's ARCHIVIST_ALLOWED_PATHS. A
    caller confined to profiles gets its profiles' allowed paths, each kept only if it lies inside a
    server root with no hidden component below it: a profile never widens the server's setting. A
    confined caller left with none reads no files (PermissionDenied naming the setting)."""
    scope = current_scope()
    roots = allowed_roots(server)
    if scope.allowed_paths is None:
        return roots, SERVER_SETTING
    names = ", ".join(scope.profiles) or "none"
    if not scope.allowed_paths:
        raise PermissionDenied(
            f"Reading files is not allowed for this caller: its profiles ({names}) have no allowed paths.",
            "Add the text with content=..., or ask the server's owner to give a profile allowed paths "
            "(`archivist profile update NAME --allowed-path DIR`, inside ARCHIVIST_ALLOWED_PATHS).",
        )
    mine = [
        path
        for path in allowed_roots([Path(p) for p in scope.allowed_paths])
        if is_within(path, roots) and not hidden_component(path, roots)
    ]
    if not mine:
        raise PermissionDenied(
            f"Reading files is not allowed for this caller: the allowed paths of its profiles ({names}) "
            "lie outside the server's ARCHIVIST_ALLOWED_PATHS.",
            "Add the text with content=..., or ask the server's owner to give the profile allowed paths "
            "inside ARCHIVIST_ALLOWED_PATHS (`archivist profile update NAME --allowed-path DIR`).",
        )
    return mine, PROFILE_SETTING


def resolve_caller_path(raw: str, server: list[Path]) -> Path:
    """`resolve_allowed_path` within the current caller's roots (`caller_roots`)."""
    roots, setting = caller_roots(server)
    return resolve_allowed_path(raw, roots, setting)


def resolve_allowed_path(raw: str, allowed: list[Path], setting: str = SERVER_SETTING) -> Path:
    """Resolve a user-supplied path; refuse anything outside the allowed roots or hidden below them."""
    if not raw or not raw.strip():
        raise InvalidArgument("file_path is empty.", "Provide the path of a file or directory.")
    roots = allowed_roots(allowed)
    candidate = Path(raw.strip()).expanduser()
    if not candidate.is_absolute():
        candidate = Path.cwd() / candidate
    resolved = check_allowed(candidate.resolve(), roots, raw, setting)
    if not resolved.exists():
        raise NotFound(
            f"No such file or directory: {raw}",
            "Check the path; relative paths start at the server's working directory.",
        )
    return resolved


def check_allowed(resolved: Path, roots: list[Path], raw: str, setting: str = SERVER_SETTING) -> Path:
    """`resolved` (a real path) if it lies under a root and has no hidden component below it."""
    if not roots:
        raise PermissionDenied(
            "Reading files is turned off on this server (no allowed paths).",
            "Add the text with content=..., or ask the server's owner to set ARCHIVIST_ALLOWED_PATHS.",
        )
    if not is_within(resolved, roots):
        raise PermissionDenied(
            f"Access to '{raw}' is not allowed: it resolves outside the allowed paths.",
            "Use a file under one of: " + ", ".join(str(r) for r in roots) + f" ({setting}).",
        )
    if hidden_component(resolved, roots):
        raise PermissionDenied(
            f"Access to '{raw}' is not allowed: hidden files and folders (.env, .git, .ssh, ...) are never read.",
            "Name a file that is not hidden and not inside a hidden folder.",
        )
    return resolved


def hidden_component(path: Path, roots: list[Path]) -> str | None:
    """The first component of `path` below its allowed root that starts with '.', if any."""
    root = max((r for r in roots if path == r or path.is_relative_to(r)), key=lambda r: len(r.parts), default=None)
    below = path.relative_to(root).parts if root is not None else path.parts
    return next((part for part in below if part.startswith(".")), None)


def read_allowed_file(path: Path, allowed: list[Path], max_bytes: int, setting: str = SERVER_SETTING) -> bytes:
    """The bytes of `path`, re-checked at the moment of reading.

    The file is opened without following a final symlink, and the path the kernel actually opened
    (/proc/self/fd, else the path re-resolved with the same device and inode) must still pass the
    allowed-roots and hidden-component checks: a file swapped for a symlink after the first check
    is refused, not read.
    """
    roots = allowed_roots(allowed)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise PermissionDenied(
            f"Could not open '{path}': {exc.strerror or 'refused'} (a symlink is not followed at read time).",
            "Name the real file, under the allowed paths.",
        ) from None
    with os.fdopen(fd, "rb") as handle:
        check_allowed(opened_path(fd, path), roots, str(path), setting)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InvalidArgument(f"{path} is not a regular file.", "Pass a file or a directory path.")
        check_size(path.name, info.st_size, max_bytes)
        data = handle.read(max_bytes + 1)
    check_size(path.name, len(data), max_bytes)  # a file that grew since fstat
    return data


def opened_path(fd: int, path: Path) -> Path:
    """The real path of an open file: /proc/self/fd on Linux, else `path` re-resolved if it is the same inode."""
    link = Path(f"/proc/self/fd/{fd}")
    try:
        return Path(os.readlink(link))
    except OSError:
        pass
    again = path.resolve()
    opened, current = os.fstat(fd), os.stat(again)
    if (opened.st_dev, opened.st_ino) != (current.st_dev, current.st_ino):
        raise PermissionDenied(f"'{path}' changed while it was being read.", "Retry once the file is stable.")
    return again


def check_file_size(path: Path, max_bytes: int) -> int:
    size = path.stat().st_size
    check_size(path.name, size, max_bytes)
    return size


def check_size(name: str, size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise InvalidArgument(
            f"{name} is {size / 1048576:.1f} MB, over the {max_bytes / 1048576:.1f} MB limit.",
            "Split the file, or raise ARCHIVIST_MAX_FILE_MB on the server.",
        )


def walk_files(directory: Path, extensions: set[str], recursive: bool = True) -> Iterator[Path]:
    """Files under `directory` (only its top level unless `recursive`) with one of `extensions`, skipping
    hidden and tool folders. Paths are not resolved: the caller checks each with `resolve_allowed_path`."""
    return (path for path, reason in scan_files(directory, extensions, recursive) if reason is None)


def scan_files(
    directory: Path, extensions: set[str], recursive: bool = True, supported: set[str] | None = None
) -> Iterator[tuple[Path, str | None]]:
    """Every file `walk_files` looks at, with the reason it is passed over (None: it is wanted):
    "hidden", "extension not selected" (one of `supported`, left out by `extensions`), "unsupported type"."""
    for dirpath, dirnames, filenames in os.walk(directory, followlinks=False):
        dirnames[:] = (
            sorted(d for d in dirnames if d not in SKIPPED_DIRS and not d.startswith(".")) if recursive else []
        )
        for name in sorted(filenames):
            path = Path(dirpath) / name
            suffix = path.suffix.lower()
            if name.startswith("."):
                yield path, "hidden"
            elif suffix in extensions:
                yield path, None
            else:
                yield path, "extension not selected" if supported and suffix in supported else "unsupported type"
