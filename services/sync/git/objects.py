"""Git objects read only when their header says they fit (the "git-blob" and "git-tree" budgets).

A pack stores each object deflated, so a 1 MB pack can hold a blob of a gigabyte of zeros, and dulwich
inflates an object whole the moment it is asked for it. Git writes an object's size in front of it
(a pack entry's header, a delta's header, a loose object's "blob 123\\0"), so `object_size` reads those
few bytes and `BoundedStore` refuses an object over the cap before anything is inflated. The walks of
services/sync/git/tree.py (listing, diff, rename detection, .gitignore files) and the runner's blob
reads all go through `BoundedStore`, which also watches the walk's deadline on every object read.
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from pathlib import Path
from typing import Any

from dulwich.object_store import BaseObjectStore
from dulwich.objects import Commit, ObjectID, RawObjectID, ShaFile, Tree, hex_to_sha, sha_to_hex

from services.budgets import Meter, budget
from services.errors import InvalidArgument

OFS_DELTA, REF_DELTA = 6, 7
#: Bytes read from a pack at an object's offset: its header, a delta's base, the start of its data.
HEADER_READ = 512


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """A little-endian base-128 number (a delta's sizes) at `position`: (value, next position)."""
    value = shift = 0
    while True:
        byte = data[position]
        value |= (byte & 0x7F) << shift
        position, shift = position + 1, shift + 7
        if not byte & 0x80:
            return value, position


def _packed_size(head: bytes) -> int:
    """The inflated size of the pack entry starting with `head` (a delta's result size, read from the
    first bytes of the inflated delta)."""
    byte, position = head[0], 1
    kind, size, shift = (byte >> 4) & 7, byte & 0x0F, 4
    while byte & 0x80:
        byte = head[position]
        size |= (byte & 0x7F) << shift
        position, shift = position + 1, shift + 7
    if kind not in (OFS_DELTA, REF_DELTA):
        return size
    if kind == OFS_DELTA:
        while head[position] & 0x80:
            position += 1
        position += 1
    else:
        position += 20
    delta = zlib.decompressobj().decompress(head[position:], 32)
    _, after_base = _varint(delta, 0)  # the base's size, then the result's
    return _varint(delta, after_base)[0]


def _loose_size(path: Path) -> int | None:
    with path.open("rb") as file:
        header = zlib.decompressobj().decompress(file.read(HEADER_READ), 64)
    kind, _, rest = header.partition(b" ")
    size = rest.split(b"\0", 1)[0]
    return int(size) if kind and size.isdigit() else None


def object_key(sha: bytes) -> ObjectID | RawObjectID:
    """A sha as dulwich's stores take it: 40 hex digits, else the 20 raw bytes."""
    return ObjectID(sha) if len(sha) == 40 else RawObjectID(sha)


def commit_at(store: BaseObjectStore | BoundedStore, sha: bytes) -> Commit:
    """The commit `sha` names (InvalidArgument when it names another kind of object)."""
    found = store[object_key(sha)]
    if not isinstance(found, Commit):
        raise InvalidArgument("The ref does not name a commit.", "Pass a branch or tag that points at a commit.")
    return found


def object_size(store: BaseObjectStore, sha: bytes) -> int | None:
    """The inflated size of object `sha` (hex), read from its header without inflating it; None when
    the store keeps it where no header can be read (it is then read as dulwich reads it)."""
    for pack in store.packs:
        try:
            offset = pack.index.object_offset(hex_to_sha(ObjectID(sha)) if len(sha) == 40 else RawObjectID(sha))
        except KeyError:
            continue
        with open(pack.data.path, "rb") as file:
            file.seek(offset)
            head = file.read(HEADER_READ)
        try:
            return _packed_size(head)
        except (IndexError, zlib.error):
            return None  # truncated or corrupt: dulwich says so when it reads the object
    root = getattr(store, "path", None)
    hexsha = sha if len(sha) == 40 else sha_to_hex(RawObjectID(sha))
    loose = Path(root) / hexsha[:2].decode() / hexsha[2:].decode() if root else None
    if loose is None or not loose.is_file():
        return None
    try:
        return _loose_size(loose)
    except zlib.error:
        return None


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
            raise budget("git-blob").over(
                f"object {name} is {size:,} bytes, over {self.max_object_bytes:,}",
                "Large files are not synced; exclude them with exclude_patterns, or raise ARCHIVIST_MAX_FILE_MB.",
            )
        return self.store[object_key(sha)]

    def __contains__(self, sha: Any) -> bool:
        return sha in self.store
