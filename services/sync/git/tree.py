"""Which files of a commit belong to a git source, and what a sync must do to reach that commit.

A file belongs when it is a regular file (no symlinks or submodules), not hidden (no path part
starting with "." and no tool folder such as node_modules), not ignored by the repository's own
`.gitignore` files (read from the commit's tree), has a parser, and passes the source's patterns.

`plan()` compares what the commit holds with the manifest of the last syncs (path -> blob): with
the last synced commit at hand only the paths dulwich's tree diff names are compared (renames come
from its rename detector); without it (first sync, new patterns, a changed `.gitignore`) every path.

A tree is outside content: a tree that names one subtree ten times per level lists 10^8 paths from a
few objects. So the walk counts every entry it visits against the "git-tree" budget (entries, depth,
time), stops as soon as it has one file more than the sync takes, skips hidden folders without
entering them, and reads objects only through `BoundedStore` (services/sync/git/objects.py: sizes
checked before inflating). A diff past the budget falls back to the bounded listing.
"""

from __future__ import annotations

import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from io import BytesIO
from typing import cast

from dulwich.diff_tree import CHANGE_COPY, CHANGE_RENAME, RenameDetector, tree_changes
from dulwich.errors import NotTreeError
from dulwich.ignore import IgnoreFilter, IgnoreFilterManager, read_ignore_patterns
from dulwich.object_store import BaseObjectStore
from dulwich.objects import Blob, ObjectID, SubmoduleEncountered, Tree

from services.access.paths import SKIPPED_DIRS
from services.core.budgets import budget
from services.core.errors import OverBudget
from services.sync.git.config import GitConfig, hidden
from services.sync.git.objects import BoundedStore, commit_at

IGNORE_FILE = ".gitignore"
#: A diff naming more than this many changes per file the sync takes is not cheaper than a listing.
DIFF_PER_FILE = 4


def bounded(store: BaseObjectStore | BoundedStore, max_object_bytes: int) -> BoundedStore:
    """`store` seen through the git budgets (objects up to `max_object_bytes`, the walk's deadline)."""
    if isinstance(store, BoundedStore):
        return store
    return BoundedStore(store, budget("git-tree").meter(), max_object_bytes)


class TreeIgnores(IgnoreFilterManager):
    """The repository's `.gitignore` rules, read from a tree instead of a work tree."""

    def __init__(self, store: BoundedStore, tree_id: bytes) -> None:
        super().__init__("", [], False)
        self.store = store
        self.tree_id = tree_id

    def _load_path(self, path: str) -> IgnoreFilter | None:
        if path not in self._path_filters:
            name = f"{path}/{IGNORE_FILE}" if path else IGNORE_FILE
            blob = lookup_blob(self.store, self.tree_id, name)
            patterns = list(read_ignore_patterns(BytesIO(blob.data))) if blob is not None else None
            self._path_filters[path] = IgnoreFilter(patterns, False, path=name) if patterns else None
        return self._path_filters[path]

    def _is_dir(self, path: str) -> bool:
        return path.endswith("/")  # only files are asked about


def lookup_entry(store: BoundedStore, tree_id: bytes, path: str) -> bytes | None:
    """The blob sha of the regular file at `path` of a tree (nothing inflated but the trees on the way),
    or None."""
    try:
        tree = store[tree_id]
        assert isinstance(tree, Tree)
        mode, sha = tree.lookup_path(store.__getitem__, path.encode())
    except (KeyError, ValueError, AssertionError, NotTreeError, SubmoduleEncountered):
        return None  # not there, or a file or submodule where a folder was expected
    return sha if stat.S_ISREG(mode) else None


def lookup_blob(store: BoundedStore, tree_id: bytes, path: str) -> Blob | None:
    """The regular file at `path` of a tree, or None; OverBudget for a blob over the object cap."""
    sha = lookup_entry(store, tree_id, path)
    blob = store[sha] if sha is not None else None
    return blob if isinstance(blob, Blob) else None


class Rules:
    """Whether a path of one commit belongs to the source."""

    def __init__(self, store: BoundedStore, tree_id: bytes, config: GitConfig) -> None:
        self.ignores = TreeIgnores(store, tree_id)
        self.patterns = config.patterns

    def wants(self, path: str) -> bool:
        return not hidden(path) and self.patterns.wants(path) and not self.ignores.is_ignored(path)


def decode(path: bytes) -> str | None:
    try:
        return path.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _tree(store: BoundedStore, sha: bytes) -> Tree:
    tree = store[sha]
    if not isinstance(tree, Tree):
        raise NotTreeError(sha)
    return tree


def skipped_folder(name: bytes) -> bool:
    """A folder whose every path is hidden (services.sync.git.config.hidden): never entered."""
    return name.startswith(b".") or name.decode("utf-8", "replace") in SKIPPED_DIRS


def list_files(store: BoundedStore, tree_id: bytes, rules: Rules, max_files: int) -> dict[str, str]:
    """The files of the tree that belong to the source (path -> blob sha), in path order, at most
    `max_files + 1` (one more says there are more). Each entry visited is counted on `store.meter`."""
    limits, entries = budget("git-tree"), store.meter
    found: dict[str, str] = {}
    stack = [(b"", iter(_tree(store, tree_id).iteritems()))]
    while stack:
        prefix, items = stack[-1]
        entry = next(items, None)
        if entry is None:
            stack.pop()
            continue
        entries.tick()
        if stat.S_ISDIR(entry.mode):
            if len(stack) >= limits.depth:
                raise limits.over(f"folders nested deeper than {limits.depth}")
            if not skipped_folder(entry.path):
                stack.append((prefix + entry.path + b"/", iter(_tree(store, entry.sha).iteritems())))
            continue
        path = decode(prefix + entry.path)
        if path is not None and stat.S_ISREG(entry.mode) and rules.wants(path):
            found[path] = entry.sha.decode()
            if len(found) > max_files:
                break
    return found


@dataclass
class Diff:
    """The paths a tree diff names, and the renames it found (new path -> old path)."""

    paths: set[str] = field(default_factory=set)
    renames: dict[str, str] = field(default_factory=dict)

    @property
    def touches_ignores(self) -> bool:
        return any(p == IGNORE_FILE or p.endswith("/" + IGNORE_FILE) for p in self.paths)


def diff_trees(store: BoundedStore, old_tree: bytes, new_tree: bytes, max_changes: int) -> Diff | None:
    """The paths that differ between two trees, renames found; None past `max_changes` changes (the
    caller lists the new tree instead, which stops at the file limit and is no dearer then)."""
    changes = budget("git-tree").meter("changed entries", max_changes)
    walked = cast(BaseObjectStore, store)  # dulwich's walks only read `store[sha]` and `sha in store`
    trees = ObjectID(old_tree), ObjectID(new_tree)
    try:
        for _ in tree_changes(walked, *trees):  # counted first: the rename detector collects all
            changes.tick()
    except OverBudget:
        return None
    diff = Diff()
    for change in tree_changes(walked, *trees, rename_detector=RenameDetector(walked)):
        old = decode(change.old.path) if change.old and change.old.path else None
        new = decode(change.new.path) if change.new and change.new.path else None
        diff.paths.update(p for p in (old, new) if p)
        if change.type in (CHANGE_RENAME, CHANGE_COPY) and old and new:
            diff.renames[new] = old
    return diff


@dataclass
class Plan:
    """What a sync does: files to (re)ingest (with the path each was renamed from), paths to forget."""

    files: list[tuple[str, str | None]] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    full: bool = False


def plan(
    paths: Iterable[str],
    target: Callable[[str], str | None],
    manifest: dict[str, str],
    renames: dict[str, str] | None = None,
) -> Plan:
    """Compare the target blob of each path (None: not in the source) with the manifest's."""
    changed: list[str] = []
    gone: set[str] = set()
    for path in sorted(set(paths)):
        want, have = target(path), manifest.get(path)
        if want == have:
            continue
        if want is None:
            gone.add(path)
        else:
            changed.append(path)
    result = Plan()
    by_blob = {manifest[p]: p for p in sorted(gone, reverse=True)}
    for path in changed:
        source = None
        if path not in manifest:
            candidate = (renames or {}).get(path)
            source = candidate if candidate in gone else by_blob.get(target(path) or "")
            if source is not None and source in gone:
                gone.discard(source)
                if by_blob.get(manifest[source]) == source:
                    del by_blob[manifest[source]]
            else:
                source = None
        result.files.append((path, source))
    result.gone = sorted(gone)
    return result


def plan_sync(
    store: BaseObjectStore | BoundedStore,
    config: GitConfig,
    commit: str,
    manifest: dict[str, str],
    max_files: int,
    max_object_bytes: int,
) -> tuple[Plan, list[str]]:
    """The plan to bring the manifest to `commit`, and warnings (files over the limit). OverBudget
    when the tree is over its budget even for listing (entries, depth, object size, time)."""
    store = bounded(store, max_object_bytes)
    new_tree = commit_at(store, commit.encode()).tree
    rules = Rules(store, new_tree, config)
    old = config.last_commit.encode() if config.last_commit else None
    if old is not None and old in store and config.last_patterns == config.patterns_key():
        diff = diff_trees(store, commit_at(store, old).tree, new_tree, DIFF_PER_FILE * max_files)
        if diff is not None and not diff.touches_ignores:

            def target(path: str) -> str | None:
                sha = lookup_entry(store, new_tree, path) if rules.wants(path) else None
                return sha.decode() if sha is not None else None

            return plan(diff.paths, target, manifest, diff.renames), []
    files = list_files(store, new_tree, rules, max_files)
    warnings = []
    if len(files) > max_files:
        warnings.append(
            f"The repository has more than {max_files} matching files; only the first {max_files} are synced."
        )
        files = dict(sorted(files.items())[:max_files])
    result = plan(set(files) | set(manifest), files.get, manifest)
    result.full = True
    return result, warnings
