"""Git objects read only when their header says they fit (the "git-blob" and "git-tree" budgets).

A pack stores each object deflated, so a 1 MB pack can hold a blob of a gigabyte of zeros, and dulwich
inflates an object whole the moment it is asked for it. Git writes an object's size in front of it
(a pack entry's header, a delta's header, a loose object's "blob 123\\0"), so `object_size`
(services/sync/git/packs.py, which also lands fetched packs under the same cap) reads those few bytes
and `BoundedStore` refuses an object over the cap before anything is inflated. The walks of
services/sync/git/tree.py (listing, diff, rename detection, .gitignore files) and the runner's blob
reads all go through `BoundedStore`, which also watches the walk's deadline on every object read.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from dulwich.object_store import BaseObjectStore
from dulwich.objects import Commit, ObjectID, RawObjectID, ShaFile, Tree, sha_to_hex

from services.core.budgets import Meter
from services.core.errors import InvalidArgument
from services.sync.git.packs import object_size, over_cap


def object_key(sha: bytes) -> ObjectID | RawObjectID:
    """A sha as dulwich's stores take it: 40 hex digits, else the 20 raw bytes."""
    return ObjectID(sha) if len(sha) == 40 else RawObjectID(sha)


def commit_at(store: BaseObjectStore | BoundedStore, sha: bytes) -> Commit:
    """The commit `sha` names (InvalidArgument when it names another kind of object)."""
    found = store[object_key(sha)]
    if not isinstance(found, Commit):
        raise InvalidArgument("The ref does not name a commit.", "Pass a branch or tag that points at a commit.")
    return found


class BoundedStore:
    """An object store seen through the budget: each object is size-checked before it is read, and
    each read watches `meter`'s deadline. Only what the walks use: `store[sha]` and `sha in store`.
    The last trees read are kept: path look-ups (.gitignore files, diffs) read the same trees again."""

    TREES_KEPT = 512

    def __init__(self, store: BaseObjectStore, meter: Meter, max_object_bytes: int) -> None:
        self.store = store
        self.meter = meter
        self.max_object_bytes = max_object_bytes
        self._trees: OrderedDict[bytes, Tree] = OrderedDict()

    def __getitem__(self, sha: bytes) -> ShaFile:
        self.meter.check_time()
        if sha in self._trees:
            self._trees.move_to_end(sha)
            return self._trees[sha]
        found = self._read(sha)
        if isinstance(found, Tree):
            self._trees[sha] = found
            if len(self._trees) > self.TREES_KEPT:
                self._trees.popitem(last=False)
        return found

    def _read(self, sha: bytes) -> ShaFile:
        size = object_size(self.store, sha)
        if size is not None and size > self.max_object_bytes:
            name = (sha if len(sha) == 40 else sha_to_hex(RawObjectID(sha))).decode()[:12]
            raise over_cap(f"object {name}", size, self.max_object_bytes)
        return self.store[object_key(sha)]

    def __contains__(self, sha: Any) -> bool:
        return sha in self.store
