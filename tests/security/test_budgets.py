"""Every format parsed from outside bytes has a budget, and holds it (issue 27, builds 1 and 2).

The budget table (services/core/budgets.py) and the parser registry are walked: each registry row names a
budget, each budget has bombs of its own kind below, and each bomb goes through the format's real
path (the parser pool or a thread for files, the spec, sitemap, robots, llms.txt and git readers)
while this process's peak RSS, the peak RSS of the parser worker that did the work (what is held at
once, not only what is counted) and the wall time are measured; the process's address space is capped
meanwhile, so code without budgets fails here instead of exhausting the machine. A new parser row or
budget row without a bomb fails `test_every_budget_has_bombs`. Text parsers also get property-based
inputs (hypothesis), bounded to a few seconds.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

import pytest
from dulwich.object_format import DEFAULT_OBJECT_FORMAT
from dulwich.objects import Blob, Commit, Tree
from dulwich.pack import pack_object_header
from dulwich.repo import Repo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.code.symbols import Symbols, extract
from services.core.budgets import BUDGETS
from services.core.errors import OverBudget, ServiceError
from services.core.settings import Settings
from services.net.robots import RobotsPolicy, parse_llms_txt
from services.net.sitemap import parse_sitemap
from services.parsers import REGISTRY, parse_bytes
from services.parsers.isolation import ISOLATED_EXTENSIONS, parse_file, parser_pool
from services.sync.git.config import GitConfig
from services.sync.git.packs import incoming_pack, land_pack, object_size
from services.sync.git.tree import bounded, lookup_blob, plan_sync
from tests.conftest import make_settings
from tests.security import bombs
from tests.security.bombs import MB, measured

UA = "ArchivistBot/0.1"


@dataclass(frozen=True)
class Bomb:
    name: str  # a file name for files, a label otherwise
    build: Callable[[], Any]
    refused: bool  # True: must end in a ServiceError with a suggestion; False: parsed, bounded
    max_mb: float = 64.0  # this process's peak RSS growth
    worker_mb: float = 512.0  # a parser worker's peak RSS growth (what isolated work holds at once)
    max_seconds: float = 30.0


#: Bombs per budget. Files go through services/parsers/isolation.parse_file (pool or thread, as served).
BOMBS: dict[str, list[Bomb]] = {
    "text": [Bomb("storm.md", bombs.text_link_storm, refused=False), Bomb("storm.py", bombs.text_link_storm, False)],
    "structured": [
        Bomb("laughs.yaml", lambda: bombs.yaml_alias_spec().encode(), refused=True),
        Bomb("deep.json", bombs.json_nested, refused=True),
        Bomb("deep.toml", bombs.toml_nested, refused=True),
    ],
    "html": [
        Bomb("deep.html", bombs.html_nested, refused=True),  # no text left once lxml caps the nesting
        Bomb("blocks.html", lambda: bombs.html_flat_blocks(15_000), refused=False),
    ],
    "pdf": [Bomb("inflating.pdf", bombs.pdf_inflating, refused=True)],
    "office": [
        Bomb("laughs.docx", bombs.docx_laughs, refused=True),
        Bomb("laughs.pptx", bombs.pptx_laughs, refused=True),
        Bomb("laughs.epub", bombs.epub_laughs, refused=False),  # the entity is left as text
        Bomb("laughs.odt", bombs.odt_laughs, refused=True),
    ],
    "spreadsheet": [Bomb("far.xlsx", bombs.xlsx_far_cell, refused=True)],
    "csv": [
        Bomb("wide.csv", bombs.csv_padding, refused=True),
        Bomb("wide.tsv", lambda: bombs.csv_padding(separator="\t"), refused=True),
    ],
    "rtf": [Bomb("deep.rtf", bombs.rtf_nested, refused=False)],
    "openapi": [Bomb("fanout.json", bombs.fanout_spec, refused=True)],
    "yaml-aliases": [Bomb("laughs.yaml", bombs.yaml_alias_spec, refused=True)],
    "sitemap": [
        Bomb("entities", bombs.entity_sitemap, refused=True),
        Bomb("element flood", bombs.element_flood_sitemap, refused=True),
    ],
    "robots": [Bomb("rule flood", bombs.robots_flood, refused=False)],
    "llms": [Bomb("link flood", bombs.llms_flood, refused=False)],
    "git-tree": [
        Bomb("wanted leaves", lambda: "readme.md", refused=False),
        Bomb("unwanted leaves", lambda: "data.bin", refused=True),
    ],
    "git-blob": [Bomb("inflating blob", lambda: 48 * MB, refused=True)],
    "git-pack": [Bomb("inflating pack", lambda: 48 * MB, refused=False, max_mb=32, worker_mb=96)],
    "git-deltas": [Bomb("delta fan", lambda: 120, refused=True, max_mb=32, worker_mb=256, max_seconds=90)],
    "code-symbols": [  # capped, never refused: the file keeps its chunks and lines
        Bomb("many.py", bombs.python_symbol_flood, refused=False, max_mb=200),
        Bomb("minified.js", bombs.minified_line, refused=False, max_mb=200),
    ],
}
FILE_BUDGETS = {entry.budget for entry in REGISTRY}


@pytest.fixture(scope="module")
def parse_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    files = tmp_path_factory.mktemp("budget-files")
    return make_settings("postgresql://unused", files, parse_workers=1)


@pytest.fixture(scope="module", autouse=True)
async def warm_pool(parse_settings: Settings) -> None:
    """Start the parser pool before anything is measured (a forkserver takes seconds to start)."""
    await parse_file(b'{"warm": true}', PurePath("warm.json"), parse_settings)


@pytest.fixture(autouse=True)
def address_space() -> Iterator[None]:
    """Cap this process's address space 2 GB above what it has: an unbudgeted parse fails the test
    with MemoryError instead of taking the machine."""
    with bombs.address_space(2048):
        yield


# ---------------------------------------------------------------- the table


def test_every_parser_names_a_budget() -> None:
    for entry in REGISTRY:
        assert entry.budget in BUDGETS, f"{entry.class_name} names no budget row"
    assert {".pdf", ".docx", ".epub", ".json", ".yaml", ".rtf"} <= ISOLATED_EXTENSIONS
    assert not {".html", ".md", ".txt", ".csv"} & ISOLATED_EXTENSIONS  # light formats stay in a thread
    assert BUDGETS["openapi"].isolated  # specs are converted in the pool too


def test_every_budget_has_bombs() -> None:
    assert set(BOMBS) == set(BUDGETS), "each budget row needs bombs of its own kind here"
    for name in FILE_BUDGETS:
        for bomb in BOMBS[name]:
            assert Path(bomb.name).suffix in {e for entry in REGISTRY if entry.budget == name for e in entry.extensions}


# ---------------------------------------------------------------- each bomb through its real path


def capped_symbols(bomb: Bomb) -> Symbols:
    """The symbol extraction of a bomb: it stops at the budget and says so."""
    language = "python" if bomb.name.endswith(".py") else "javascript"
    symbols = extract(bomb.build(), language, bomb.name)
    limits = BUDGETS["code-symbols"]
    kept = len(symbols.definitions) + sum(len(lines) for lines in symbols.references.values())
    assert symbols.capped and kept <= limits.structure, (symbols.capped, kept)
    return symbols


async def run_bomb(budget: str, bomb: Bomb, settings: Settings, tmp_path: Path) -> Any:
    """Feed the bomb to its format's reader; the reader's result (a ServiceError is returned)."""
    try:
        if budget in FILE_BUDGETS:
            return await parse_file(bomb.build(), PurePath(bomb.name), settings)
        if budget in ("openapi", "yaml-aliases"):
            from services.documents.specs import spec_documents

            return await spec_documents(bomb.build(), bomb.name, settings)
        if budget == "sitemap":
            return await asyncio.to_thread(parse_sitemap, bomb.build())
        if budget == "robots":
            policy = await asyncio.to_thread(RobotsPolicy, bomb.build(), UA)
            assert policy.cut and all(policy.can_fetch(f"https://h.example/q{i}") for i in range(50))
            return policy
        if budget == "llms":
            return await asyncio.to_thread(parse_llms_txt, bomb.build(), "https://h.example/llms.txt")
        if budget == "git-tree":
            return await asyncio.to_thread(plan_tree_bomb, tmp_path, bomb.build())
        if budget == "git-pack":
            return await land_inflating_pack(tmp_path, bomb.build(), settings)
        if budget == "git-deltas":
            return await land_in_pool(tmp_path, lambda file: bombs.delta_fan_pack(file, bomb.build()), settings)
        if budget == "code-symbols":
            return await asyncio.to_thread(capped_symbols, bomb)
        return await asyncio.to_thread(read_inflating_blob, tmp_path, bomb.build())
    except ServiceError as exc:
        return exc


@pytest.mark.parametrize(
    ("budget", "bomb"),
    [pytest.param(name, bomb, id=f"{name}:{bomb.name}") for name, found in BOMBS.items() for bomb in found],
)
async def test_each_format_holds_its_budget(budget: str, bomb: Bomb, parse_settings: Settings, tmp_path: Path) -> None:
    with measured() as cost:
        outcome = await run_bomb(budget, bomb, parse_settings, tmp_path)
    assert cost.grew_mb < bomb.max_mb, f"{bomb.name}: the server grew by {cost.grew_mb:.0f} MB"
    assert cost.worker_mb < bomb.worker_mb, f"{bomb.name}: a parser worker grew by {cost.worker_mb:.0f} MB"
    assert cost.seconds < bomb.max_seconds, f"{bomb.name}: {cost.seconds:.1f} s"
    if bomb.refused:
        assert isinstance(outcome, ServiceError), outcome
        assert outcome.suggestion and not outcome.retryable, outcome.message
    else:
        assert not isinstance(outcome, ServiceError), outcome.message
    limits = BUDGETS[budget]
    if hasattr(outcome, "content"):
        assert len(outcome.content) <= limits.output_chars
    if isinstance(outcome, list) and budget == "llms":
        assert len(outcome) == limits.structure


# ---------------------------------------------------------------- git readers on a real repository


def tree_bomb(repo: Repo, leaf: str, levels: int = 8, width: int = 10) -> bytes:
    """A commit whose tree names its one subtree `width` times per level: width^levels paths from
    levels + 2 objects. Returns the commit id."""
    store = repo.object_store
    blob = Blob.from_string(b"# Leaf\n\nA leaf of the tree.\n")
    store.add_object(blob)
    tree = Tree()
    tree.add(leaf.encode(), 0o100644, blob.id)
    store.add_object(tree)
    for _ in range(levels):
        parent = Tree()
        for index in range(width):
            parent.add(f"d{index}".encode(), 0o040000, tree.id)
        store.add_object(parent)
        tree = parent
    return commit(repo, tree)


def commit(repo: Repo, tree: Tree) -> bytes:
    found = Commit()
    found.tree = tree.id
    found.author = found.committer = b"Bomb <bomb@example.com>"
    found.author_time = found.commit_time = 1_700_000_000
    found.author_timezone = found.commit_timezone = 0
    found.message = b"bomb"
    repo.object_store.add_object(found)
    return found.id


def plan_tree_bomb(tmp_path: Path, leaf: str) -> Any:
    repo = Repo.init_bare(str(tmp_path / "tree.git"), mkdir=True)
    try:
        head = tree_bomb(repo, leaf)
        config = GitConfig(uuid.uuid4(), "https://git.example/bomb.git")
        planned, warnings = plan_sync(repo.object_store, config, head.decode(), {}, 50, MB)
        assert len(planned.files) == 50 and "more than 50" in warnings[0]
        return planned
    finally:
        repo.close()


def zero_blob(repo: Repo, size: int) -> bytes:
    """A blob of `size` zero bytes written as a loose object by streaming (never whole in memory),
    then packed, as a fetch leaves it. Returns its id."""
    header = b"blob %d\0" % size
    digest, compressor, chunk = hashlib.sha1(header), zlib.compressobj(1), b"\0" * MB  # noqa: S324 - git's id
    parts = [compressor.compress(header)]
    for _ in range(size // MB):
        digest.update(chunk)
        parts.append(compressor.compress(chunk))
    parts.append(compressor.flush())
    sha = digest.hexdigest()
    loose = Path(repo.object_store.path) / sha[:2] / sha[2:]
    loose.parent.mkdir(parents=True, exist_ok=True)
    loose.write_bytes(b"".join(parts))
    return sha.encode()


def read_inflating_blob(tmp_path: Path, size: int) -> Any:
    repo = Repo.init_bare(str(tmp_path / "blob.git"), mkdir=True)
    try:
        sha = zero_blob(repo, size)
        tree = Tree()
        tree.add(b"zeros.md", 0o100644, sha)
        repo.object_store.add_object(tree)
        return lookup_blob(bounded(repo.object_store, MB), tree.id, "zeros.md")
    finally:
        repo.close()


def zero_pack(file: Any, size: int, object_format: Any) -> bytes:
    """A received pack of one blob of `size` zero bytes, streamed into `file` (never whole in memory):
    the pack header, the entry's header (dulwich's), the deflated zeros, the trailing SHA-1. Its id."""
    digest, trailer = hashlib.sha1(b"blob %d\0" % size), hashlib.sha1()  # noqa: S324 - git's ids
    compressor, chunk = zlib.compressobj(1), b"\0" * MB

    def write(data: bytes) -> None:
        trailer.update(data)
        file.write(data)

    write(b"PACK" + (2).to_bytes(4, "big") + (1).to_bytes(4, "big"))
    write(bytes(pack_object_header(Blob.type_num, None, size, object_format)))
    for _ in range(size // MB):
        digest.update(chunk)
        write(compressor.compress(chunk))
    write(compressor.flush())
    file.write(trailer.digest())
    return digest.hexdigest().encode()


async def land_in_pool(tmp_path: Path, write: Callable[[Any], Any], settings: Settings, cap: int = 20 * MB) -> Any:
    """Write a received pack with `write` and land it as a fetch does: in the parser pool, under the
    object cap `cap`. Returns what `write` returned."""
    repo = Repo.init_bare(str(tmp_path / "pack.git"), mkdir=True)
    try:
        with incoming_pack(repo.object_store) as received:
            written = write(received)
            received.flush()
            await parser_pool(settings).run(BUDGETS["git-pack"], "a pack", land_pack, received.name, cap)
        return written
    finally:
        repo.close()


async def land_inflating_pack(tmp_path: Path, size: int, settings: Settings) -> int | None:
    """Land a pack whose one blob inflates to `size` under a 1 MB object cap: it is stored without being
    inflated, and its size is read from its header. Returns that size."""
    sha = await land_in_pool(tmp_path, lambda file: zero_pack(file, size, DEFAULT_OBJECT_FORMAT), settings, MB)
    with Repo(str(tmp_path / "pack.git")) as repo:
        return object_size(repo.object_store, sha)


async def test_a_landed_pack_keeps_its_big_blob_unread(tmp_path: Path, parse_settings: Settings) -> None:
    """The blob over the cap is in the store (its file is reported, not lost) and sized from its header."""
    assert await land_inflating_pack(tmp_path, 8 * MB, parse_settings) == 8 * MB


def test_a_packed_blob_is_sized_from_its_header(tmp_path: Path) -> None:
    """The size check reads a pack entry's header (and a delta's), not only loose objects."""
    repo = Repo.init_bare(str(tmp_path / "packed.git"), mkdir=True)
    try:
        base = Blob.from_string(b"harbour ledger line\n" * 4000)
        grown = Blob.from_string(base.data + b"one more line\n" * 10)
        tree = Tree()
        tree.add(b"base.md", 0o100644, base.id)
        tree.add(b"grown.md", 0o100644, grown.id)
        for item in (base, grown, tree):
            repo.object_store.add_object(item)
        repo.object_store.pack_loose_objects()
        assert not any(repo.object_store._iter_loose_objects())  # packed, deltas allowed
        store = bounded(repo.object_store, len(base.data))
        assert lookup_blob(store, tree.id, "base.md").data == base.data
        with pytest.raises(OverBudget) as refused:
            lookup_blob(store, tree.id, "grown.md")
        assert f"{len(grown.data):,} bytes" in refused.value.message
    finally:
        repo.close()


# ---------------------------------------------------------------- property-based inputs for the text parsers

TEXTISH = st.text(alphabet=st.sampled_from(list("ab #*-[]()<>{}&;:!|,\"'\n\t\\/=`~.0")), max_size=1500)
INPUTS = st.one_of(st.text(max_size=800), TEXTISH, st.binary(max_size=600))


@pytest.mark.parametrize("name", ["notes.md", "notes.txt", "tool.py", "page.html", "data.json", "conf.yaml",
                                  "conf.toml", "rows.csv"])  # fmt: skip
def test_text_parsers_answer_any_input_within_budget(name: str) -> None:
    path = Path(name)

    @settings(max_examples=30, deadline=2000, suppress_health_check=[HealthCheck.too_slow], database=None)
    @given(INPUTS)
    def parses(value: str | bytes) -> None:
        data = value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
        try:
            document = parse_bytes(data, path, MB)
        except ServiceError as exc:
            assert exc.suggestion, exc.message
            return
        assert len(document.content) <= 4 * len(data) + 200

    parses()
