"""A received pack stored without inflating what is over the object cap (the "git-pack" budget).

dulwich lands a received pack by inflating every object whole, three times (copying, indexing,
checking), so a 100 KB pack holding 100 MB of zeros cost hundreds of MB before any file limit applied.
`store_pack` reads each entry's header first (dulwich's own readers) and counts its declared size
against the fetch's inflation budget before inflating anything. An object over the cap is passed
through zlib in small slices (dulwich's `read_zlib_chunks_at`) into a hash and never held: its id goes
into the index, so the tree walks see the file and `BoundedStore` refuses it by its header like any
large file (the sync reports it, the other files go on). Everything else is resolved, parsed and
indexed by dulwich, its deltas within a bounded base cache (services/sync/git/deltas.py). A delta over
the cap, or built on an object over it, cannot be resolved without holding it: the fetch fails with a
clear error and stores nothing. Runs in the limited parser pool (`land_pack`).
"""

from __future__ import annotations

import binascii
import mmap
import os
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from dulwich.file import GitFile
from dulwich.object_store import BaseObjectStore, DiskObjectStore
from dulwich.objects import ObjectID, RawObjectID, hex_to_sha, object_header, sha_to_hex
from dulwich.pack import (
    DELTA_TYPES,
    OFS_DELTA,
    REF_DELTA,
    PackData,
    UnpackedObject,
    _decode_delta_base_offset,
    _decode_object_header,
    extend_pack,
    iter_sha1,
    read_pack_header_at,
    read_zlib_chunks_at,
    take_msb_bytes_at,
    write_pack_index,
)
from dulwich.repo import Repo

from services.core.budgets import Meter, budget
from services.sync.git.deltas import BoundedIndexer

#: Compressed bytes given to zlib at a time: one slice inflates to at most ~4 MB (deflate tops out near
#: 1032:1), and the inflater holds a slice twice while it grows its output.
SLICE = 4 * 1024
#: Inflated bytes kept of a delta: its two sizes (base, result), 10 bytes each at most.
DELTA_HEAD = 20
#: Bytes read from a stored pack at an object's offset: its header, a delta's base, the start of its data.
HEADER_READ = 512
HINT = "Large files are not synced; exclude them with exclude_patterns, or raise ARCHIVIST_MAX_FILE_MB."
DELTA_HINT = (
    "The repository stores a file over the file limit as a delta, which cannot be read without holding it "
    "whole (every object is fetched, whatever the patterns); raise ARCHIVIST_MAX_FILE_MB above its size, "
    "or follow a repository without it."
)


@dataclass(frozen=True)
class Header:
    """A pack entry's header: its type, declared inflated size, delta base and where its data starts."""

    kind: int
    size: int
    base: int | bytes | None  # OFS_DELTA: the base's offset in the pack; REF_DELTA: the base's id
    data: int  # offset of the zlib stream
    crc32: int  # of the header bytes (the index's CRC covers the whole entry)


def read_header(contents: Any, offset: int, oid_length: int = 20) -> Header:
    """The header of the entry at `offset`, read with dulwich's own readers (nothing inflated)."""
    raw, position, crc = take_msb_bytes_at(contents, offset, crc32=0)
    kind, size = _decode_object_header(raw)
    base: int | bytes | None = None
    if kind == OFS_DELTA:
        raw, position, crc = take_msb_bytes_at(contents, position, crc32=crc)
        base = offset - _decode_delta_base_offset(raw)
    elif kind == REF_DELTA:
        base = bytes(contents[position : position + oid_length])
        crc = binascii.crc32(base, crc or 0)
        position += oid_length
    return Header(kind, size, base, position, crc or 0)


def delta_result_size(head: bytes) -> int:
    """The size a delta produces: the second of the two numbers that start its inflated data."""
    _, after_base, _ = take_msb_bytes_at(head, 0)
    raw, _, _ = take_msb_bytes_at(head, after_base)
    return sum((byte & 0x7F) << (7 * index) for index, byte in enumerate(raw))


def _stored_size(head: bytes) -> int:
    header = read_header(head, 0)
    if header.kind not in DELTA_TYPES:
        return header.size
    return delta_result_size(zlib.decompressobj().decompress(head[header.data :], DELTA_HEAD))


def _loose_size(path: str) -> int | None:
    with open(path, "rb") as file:
        header = zlib.decompressobj().decompress(file.read(HEADER_READ), 64)
    kind, _, rest = header.partition(b" ")
    size = rest.split(b"\0", 1)[0]
    return int(size) if kind and size.isdigit() else None


def object_size(store: BaseObjectStore, sha: bytes) -> int | None:
    """The inflated size of object `sha` (hex or binary), read from its header without inflating it;
    None when the store keeps it where no header can be read (it is then read as dulwich reads it)."""
    raw = hex_to_sha(ObjectID(sha)) if len(sha) == 40 else RawObjectID(sha)
    for pack in store.packs:
        try:
            offset = pack.index.object_offset(raw)
        except KeyError:
            continue
        with open(pack.data.path, "rb") as file:
            file.seek(offset)
            head = file.read(HEADER_READ)
        try:
            return _stored_size(head)
        except (AssertionError, IndexError, zlib.error):
            return None  # truncated or corrupt: dulwich says so when it reads the object
    root = getattr(store, "path", None)
    hexsha = sha_to_hex(raw).decode()
    loose = os.path.join(root, hexsha[:2], hexsha[2:]) if root else None
    if loose is None or not os.path.isfile(loose):
        return None
    try:
        return _loose_size(loose)
    except zlib.error:
        return None


class _Drain:
    """Where dulwich's inflater writes an object: hashed when its id is wanted, the first bytes kept
    (a delta's sizes), nothing else held."""

    def __init__(self, hasher: Any) -> None:
        self.hasher = hasher
        self.head = b""

    def append(self, chunk: bytes) -> None:
        if self.hasher is not None:
            self.hasher.update(chunk)
        if len(self.head) < DELTA_HEAD:
            self.head += chunk[: DELTA_HEAD - len(self.head)]


@dataclass(frozen=True)
class Entry:
    header: Header
    offset: int
    result: int  # the object's declared size (a delta's: of what it produces)
    crc32: int
    sha: bytes | None  # an object over the cap: its id, hashed as it streamed past


def over_cap(what: str, size: int, limit: int, hint: str = HINT) -> Exception:
    return budget("git-blob").over(f"{what} is {size:,} bytes, over {limit:,}", hint)


class Screen:
    """One pass over a received pack: every entry's header read, its declared size counted, and each
    object over `max_object_bytes` hashed as it streams (`big`); then each delta checked against the cap."""

    def __init__(self, store: DiskObjectStore, max_object_bytes: int, meter: Meter) -> None:
        self.store = store
        self.max = max_object_bytes
        self.meter = meter
        self.hash_func = store.object_format.hash_func
        self.oid_length = store.object_format.oid_length
        self.entries: list[Entry] = []
        self.big: dict[int, Entry] = {}  # offset -> an object over the cap
        self.big_ids: dict[bytes, int] = {}  # its id -> its size

    def run(self, contents: Any) -> None:
        _, count = read_pack_header_at(contents)
        offset = 12
        for _ in range(count):
            entry, offset = self._entry(contents, offset)
            self.entries.append(entry)
            if entry.sha is not None:
                self.big[entry.offset] = entry
                self.big_ids[entry.sha] = entry.result
        for entry in self.entries:  # after the pass: a REF_DELTA's base may come later in the pack
            self._check_delta(entry)

    def _entry(self, contents: Any, offset: int) -> tuple[Entry, int]:
        header = read_header(contents, offset, self.oid_length)
        delta = header.kind in DELTA_TYPES
        if delta and header.size > self.max:
            raise over_cap(f"a delta at offset {offset} of the pack", header.size, self.max, DELTA_HINT)
        self.meter.tick(header.size)  # counted before it is inflated
        hasher = None
        if not delta and header.size > self.max:
            hasher = self.hash_func()
            hasher.update(object_header(header.kind, header.size))
        unpacked = UnpackedObject(header.kind, decomp_len=header.size, crc32=header.crc32, offset=offset)
        drain = _Drain(hasher)
        unpacked.decomp_chunks = drain  # type: ignore[assignment]
        end = read_zlib_chunks_at(contents, header.data, unpacked, buffer_size=SLICE)
        result = delta_result_size(drain.head) if delta else header.size
        sha = hasher.digest() if hasher is not None else None
        return Entry(header, offset, result, unpacked.crc32 or 0, sha), end

    def _check_delta(self, entry: Entry) -> None:
        """A delta is resolved by dulwich, which holds its base and its result: both must fit."""
        base = entry.header.base
        if entry.header.kind not in DELTA_TYPES:
            return
        self.meter.tick(entry.result)
        if entry.result > self.max:
            raise over_cap(f"an object stored as a delta at offset {entry.offset}", entry.result, self.max, DELTA_HINT)
        if isinstance(base, int) and base in self.big:
            raise over_cap(
                f"the base of the delta at offset {entry.offset}", self.big[base].result, self.max, DELTA_HINT
            )
        if isinstance(base, bytes):  # in this pack, or already stored (a thin pack's base)
            size = self.big_ids.get(base, object_size(self.store, base))
            if size is not None and size > self.max:
                raise over_cap(
                    f"object {sha_to_hex(RawObjectID(base)).decode()[:12]}, the base of a delta,",
                    size,
                    self.max,
                    DELTA_HINT,
                )


def _index(store: DiskObjectStore, path: str, screen: Screen) -> tuple[list[Any], list[RawObjectID]]:
    """Index entries of the pack at `path` (objects over the cap from the screen, the rest resolved
    by dulwich), and the bases of a thin pack to append."""
    entries: list[Any] = [(e.sha, e.offset, e.crc32) for e in screen.entries if e.sha is not None]
    with PackData(path, object_format=store.object_format) as data:
        data.check()  # the pack's trailing checksum, streamed
        indexer = BoundedIndexer(
            None, store.object_format.hash_func, resolve_ext_ref=store.get_raw, object_format=store.object_format
        )
        indexer.set_pack_data(data)
        for entry in screen.entries:
            if entry.sha is None:
                base = entry.header.base
                relative = entry.offset - base if isinstance(base, int) else base
                indexer.record(UnpackedObject(entry.header.kind, delta_base=relative, offset=entry.offset))
        entries.extend(indexer)
        return entries, indexer.ext_refs()


def _land(store: DiskObjectStore, file: IO[bytes], path: str, entries: list[Any], ext_refs: list[RawObjectID]) -> None:
    """Complete a thin pack with its bases, write its index and move it in (dulwich's `_complete_pack`
    without its check that inflates every object again: `BoundedIndexer` parsed the small ones)."""
    pack_sha, extra = extend_pack(
        file,  # type: ignore[arg-type]
        set(ext_refs),
        get_raw=store.get_raw,
        object_format=store.object_format,
        compression_level=store.pack_compression_level,
    )
    file.flush()
    entries = sorted(entries + extra)
    base = os.path.join(store.pack_dir, "pack-" + iter_sha1(e[0] for e in entries).decode("ascii"))
    if os.path.exists(base + ".idx"):
        return  # these very objects are stored already
    os.replace(path, base + ".pack")
    with GitFile(base + ".idx", "wb") as index:
        write_pack_index(index, entries, pack_sha, version=store.pack_index_version)


@contextmanager
def incoming_pack(store: DiskObjectStore) -> Iterator[IO[bytes]]:
    """A file in the pack folder to receive a pack into (ignored by the store until it has an index);
    removed on the way out unless `store_pack` moved it in."""
    file = open(os.path.join(store.pack_dir, f"incoming-{os.getpid()}-{id(store):x}.pack"), "w+b")  # noqa: SIM115
    try:
        yield file
    finally:
        file.close()
        if os.path.exists(file.name):
            os.remove(file.name)


def store_pack(
    store: DiskObjectStore, file: IO[bytes], max_object_bytes: int, max_inflated_bytes: int | None = None
) -> None:
    """Screen the pack received into `file` (from `incoming_pack`) and move it into the store. OverBudget
    when it inflates past the "git-pack" budget (or `max_inflated_bytes`) or holds a delta that cannot be
    resolved under the cap; the store is then left as it was."""
    file.flush()
    if file.tell() == 0:
        return  # nothing was new
    screen = Screen(store, max_object_bytes, budget("git-pack").meter(limit=max_inflated_bytes))
    with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as contents:
        screen.run(contents)
    entries, ext_refs = _index(store, file.name, screen)
    _land(store, file, file.name, entries, ext_refs)


def land_pack(path: str, max_object_bytes: int) -> None:
    """`store_pack` for a pack received into `path` (an `incoming_pack` file of a clone's pack folder),
    run in the limited parser pool (so: a module-level function of plain arguments)."""
    clone = Path(path).parents[2]
    with Repo(str(clone)) as repo, open(path, "r+b") as file:
        file.seek(0, os.SEEK_END)
        store_pack(repo.object_store, file, max_object_bytes)
