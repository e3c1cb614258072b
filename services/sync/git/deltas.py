"""Deltas of a received pack resolved with a bounded base cache, as git does (core.deltaBaseCacheLimit).

dulwich resolves a pack's deltas depth first and keeps the inflated base of every pending delta: a
base with two children stays alive until both are resolved, so a 16 MB blob under 120 levels of
two-child deltas held ~2 GB at once from a 21 KB pack. `BoundedIndexer` resolves in the same order but
keeps only offsets on its stack; inflated objects live in an LRU cache of `BASE_CACHE_BYTES`. A base
that was evicted is rebuilt from the pack (its chain replayed from the nearest cached ancestor, each
step cached again), so what is held at once is the cache plus one base and one result, whatever the
shape of the delta graph. Rebuilding costs time instead (a hostile graph makes it quadratic), so the
bytes a rebuild would inflate are counted against the "git-deltas" budget before it starts: a pack past
it is refused and nothing of it is stored. Each object is also parsed, as dulwich does before it lands a pack (a tree
with garbage in it is refused, not stored).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dulwich.lru_cache import LRUSizeCache
from dulwich.objects import ShaFile
from dulwich.pack import PackIndexer, UnpackedObject, unpack_object_at

from services.core.budgets import Meter, budget
from services.core.errors import OverBudget

#: Bytes of inflated bases kept at once (git's own default delta base cache is 96 MB).
BASE_CACHE_BYTES = 96 * 1024 * 1024

Chunks = list[bytes]
REBUILD_HINT = (
    "The repository's pack stores large files as deep, branching deltas that cannot be resolved within "
    "the memory Archivist allows a fetch; nothing was stored. Repack the repository on its server "
    "(git repack -adf), or follow a repository without them."
)


def _size(chunks: Chunks) -> int:
    return sum(len(chunk) for chunk in chunks)


class BoundedIndexer(PackIndexer):
    """dulwich's pack indexer with its pending bases replaced by a byte-bounded cache."""

    def __init__(
        self, *args: Any, cache_bytes: int = BASE_CACHE_BYTES, rebuilds: Meter | None = None, **kw: Any
    ) -> None:
        super().__init__(*args, **kw)
        self._bases: LRUSizeCache[int, Chunks] = LRUSizeCache(cache_bytes, compute_size=_size)
        #: offset -> (its base: an offset in this pack, None for a whole object, or an outside base's
        #: id; its resolved type; its size). Kept for every object resolved, so an evicted base can be rebuilt.
        self._origin: dict[int, tuple[int | bytes | None, int, int]] = {}
        self._rebuilds = rebuilds or budget("git-deltas").meter()

    def _result(self, unpacked: UnpackedObject) -> Any:
        assert unpacked.obj_type_num is not None and unpacked.obj_chunks is not None
        ShaFile.from_raw_chunks(unpacked.obj_type_num, unpacked.obj_chunks)
        return super()._result(unpacked)

    def _follow_chain(self, offset: int, obj_type_num: int, base_chunks: Any) -> Iterator[Any]:
        """dulwich's walk (a stack, children of the object just resolved pushed on it), holding offsets:
        a child's base is fetched from the cache (or rebuilt) only when the child is resolved."""
        outside = None
        if base_chunks is not None:  # a thin pack's delta on an object already stored: its id
            outside = self._outside_id(offset)
        todo: list[tuple[int, int | bytes | None, int]] = [(offset, outside, obj_type_num)]
        while todo:
            offset, base, type_num = todo.pop()
            unpacked = self._resolve_object(offset, type_num, self._base(base))
            chunks: Chunks = unpacked.obj_chunks  # type: ignore[assignment]
            self._origin[offset] = (base, type_num, _size(chunks))
            self._bases[offset] = chunks
            del chunks
            yield self._result(unpacked)
            children = [*self._pending_ofs.pop(offset, []), *self._pending_ref.pop(unpacked.sha(), [])]
            todo.extend((child, offset, type_num) for child in children)
            del unpacked

    def _outside_id(self, offset: int) -> bytes:
        """The id of the stored object the REF_DELTA at `offset` is built on (read from its header)."""
        unpacked = self._resolve_header(offset)
        assert isinstance(unpacked.delta_base, bytes)
        return unpacked.delta_base

    def _resolve_header(self, offset: int) -> UnpackedObject:
        assert self._contents is not None
        unpacked, _ = unpack_object_at(self._contents, offset, self.hash_func)
        return unpacked

    def _base(self, base: int | bytes | None) -> Chunks | None:
        """The inflated object a delta is built on: cached, an outside object, or rebuilt."""
        if base is None:
            return None
        if isinstance(base, bytes):
            assert self._resolve_ext_ref is not None
            return [bytes(self._resolve_ext_ref(base)[1])]  # type: ignore[arg-type]
        cached = self._bases.get(base)
        return cached if cached is not None else self._rebuild(base)

    def _rebuild(self, offset: int) -> Chunks:
        """Object `offset`, evicted: its chain walked up to a cached ancestor (or its start) and
        replayed down, each step cached again, one base and one result held at a time. What it will
        inflate is counted first (the sizes recorded when each step was resolved)."""
        chain = [offset]
        while True:
            parent = self._origin[chain[-1]][0]
            if not isinstance(parent, int) or parent in self._bases:
                break
            chain.append(parent)
        try:
            self._rebuilds.tick(sum(self._origin[step][2] for step in chain))
        except OverBudget as exc:
            raise OverBudget(exc.message, REBUILD_HINT, budget=exc.budget) from None
        top = self._origin[chain[-1]][0]
        chunks = self._base(top)
        for step in reversed(chain):
            _, type_num, _ = self._origin[step]
            resolved: Chunks = self._resolve_object(step, type_num, chunks).obj_chunks  # type: ignore[assignment]
            self._bases[step] = chunks = resolved
        assert chunks is not None
        return chunks
