"""What a folder source holds: its binding, and the files of its directory that belong to it."""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from uuid import UUID

from services.access.paths import SKIPPED_DIRS
from services.parsers import supported_extensions


@dataclass(frozen=True)
class FolderConfig:
    """A source bound to a directory. Patterns are globs on the path relative to the directory
    ("*.md", "guides/*", "drafts/**"); a pattern without "/" also matches the bare file name."""

    source_id: UUID
    path: str
    include_patterns: list[str] = field(default_factory=list)
    exclude_patterns: list[str] = field(default_factory=list)
    recursive: bool = True

    def wants(self, relative: str) -> bool:
        """Whether a file (relative posix path) belongs to the source."""
        if not self.recursive and "/" in relative:
            return False
        if Path(relative).suffix.lower() not in extensions():
            return False
        if self.include_patterns and not matches(relative, self.include_patterns):
            return False
        return not matches(relative, self.exclude_patterns)


@cache
def extensions() -> frozenset[str]:
    return frozenset(supported_extensions())


@dataclass(frozen=True)
class FileStat:
    relative: str
    size: int
    mtime_ns: int


def matches(relative: str, patterns: list[str]) -> bool:
    name = relative.rsplit("/", 1)[-1]
    for pattern in patterns:
        pattern = pattern.strip().lstrip("/")
        if fnmatch.fnmatchcase(relative, pattern) or ("/" not in pattern and fnmatch.fnmatchcase(name, pattern)):
            return True
        if pattern.endswith("/**") and (relative + "/").startswith(pattern[:-2]):
            return True
    return False


def scan(root: Path, config: FolderConfig) -> list[FileStat]:
    """Every wanted file under `root` with its size and mtime (nothing is read); hidden files and
    tool folders (.git, node_modules, ...) are skipped, and so are symlinks leaving the directory."""
    found: list[FileStat] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        if config.recursive:
            dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS and not d.startswith("."))
        else:
            dirnames[:] = []
        base = Path(dirpath)
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            path = base / name
            relative = path.relative_to(root).as_posix()
            if not config.wants(relative):
                continue
            try:
                st = path.stat()
                if path.is_symlink() and not path.resolve().is_relative_to(root):
                    continue
            except OSError:
                continue
            found.append(FileStat(relative, st.st_size, st.st_mtime_ns))
    return found
