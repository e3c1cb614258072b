"""File access limited to ARCHIVIST_ALLOWED_PATHS (after resolving `..` and symlinks)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from services.errors import InvalidArgument, NotFound, PermissionDenied

SKIPPED_DIRS = {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache", ".tox"}


def allowed_roots(allowed: list[Path]) -> list[Path]:
    return [Path(p).expanduser().resolve() for p in allowed]


def is_within(path: Path, roots: list[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def resolve_allowed_path(raw: str, allowed: list[Path]) -> Path:
    """Resolve a user-supplied path; refuse anything outside the allowed roots."""
    if not raw or not raw.strip():
        raise InvalidArgument("file_path is empty.", "Provide the path of a file or directory.")
    roots = allowed_roots(allowed)
    candidate = Path(raw.strip()).expanduser()
    if not candidate.is_absolute():
        candidate = Path.cwd() / candidate
    resolved = candidate.resolve()
    if not is_within(resolved, roots):
        raise PermissionDenied(
            f"Access to '{raw}' is not allowed: it resolves outside the allowed paths.",
            "Use a file under one of: "
            + ", ".join(str(r) for r in roots)
            + " (the server's ARCHIVIST_ALLOWED_PATHS setting).",
        )
    if not resolved.exists():
        raise NotFound(
            f"No such file or directory: {raw}",
            "Check the path; relative paths start at the server's working directory.",
        )
    return resolved


def check_file_size(path: Path, max_bytes: int) -> int:
    size = path.stat().st_size
    if size > max_bytes:
        raise InvalidArgument(
            f"{path.name} is {size / 1048576:.1f} MB, over the {max_bytes / 1048576:.1f} MB limit.",
            "Split the file, or raise ARCHIVIST_MAX_FILE_MB on the server.",
        )
    return size


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
