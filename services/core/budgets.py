"""The budget of every format Archivist parses from outside bytes, as one table.

Whatever a site, a repository or a file holds is parsed under its format's budget: the bytes read, the
characters written, a structural count (what "structure" counts is named per format: YAML nodes that
aliases add, schema nodes visited, XML elements, robots rules, tree entries walked, table cells), a depth
and the wall time. `isolated` formats are parsed in the limited worker pool (services/parsers/
isolation.py: address-space and CPU-time limits), the others in a thread of the server with the cheap
counters below. Expansions are counted where they happen, never trusted: a parser that would go over
raises `OverBudget`, the one error for all of them (INVALID_ARGUMENT in the JSON contract, with the
limit in the message and what to do in the suggestion). `tests/security/test_budgets.py` walks this table
and the parser registry, and feeds each format a bomb of its own kind.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from services.core.errors import OverBudget

MB = 1024 * 1024


@dataclass(frozen=True)
class Budget:
    """What one format may cost."""

    name: str
    #: Bytes of input; None: the operator's file cap (ARCHIVIST_MAX_FILE_MB).
    input_bytes: int | None
    #: Characters of output (text stored, or markdown rendered).
    output_chars: int
    #: The structural count and what it counts ("" when the format has none worth counting).
    structure: int
    counts: str
    #: Nesting depth (elements, YAML/JSON levels, tree levels).
    depth: int
    #: Wall-clock seconds of one parse.
    seconds: float
    #: Parsed in the limited worker pool, never in the server process.
    isolated: bool = False

    def input_limit(self, file_cap: int | None = None) -> int:
        """The input limit in force: this format's own, never above the operator's file cap."""
        limits = [limit for limit in (self.input_bytes, file_cap) if limit is not None]
        return min(limits) if limits else sys.maxsize

    def meter(self, what: str | None = None, limit: int | None = None) -> Meter:
        """A counter of this budget's structure (or of `what`, up to `limit`) with its deadline."""
        return Meter(self, what or self.counts, self.structure if limit is None else limit)

    def over(self, detail: str, suggestion: str = "") -> OverBudget:
        """The error for going over: `detail` says which limit."""
        return OverBudget(
            f"{self.name} over its budget: {detail}.",
            suggestion
            or "This content is larger or more deeply expanded than Archivist parses; split it, "
            "or convert it to plain text first.",
            budget=self.name,
        )

    def check_input(self, size: int, file_cap: int | None = None, what: str = "input") -> None:
        limit = self.input_limit(file_cap)
        if size > limit:
            raise self.over(f"{what} is {size:,} bytes, over {limit:,}")

    def check_output(self, chars: int, what: str = "output") -> None:
        if chars > self.output_chars:
            raise self.over(f"{what} reached {chars:,} characters, over {self.output_chars:,}")


class Meter:
    """Counts one structural quantity against its limit and watches the budget's deadline.

    `tick()` is cheap (an add and a compare; the clock is read every 1,024 ticks), so it can sit in the
    inner loop of a walk. Going over either raises the budget's OverBudget.
    """

    CLOCK_EVERY = 1024

    def __init__(self, budget: Budget, what: str, limit: int) -> None:
        self.budget = budget
        self.what = what
        self.limit = limit
        self.count = 0
        self.deadline = time.monotonic() + budget.seconds
        self._next_clock = self.CLOCK_EVERY

    def tick(self, amount: int = 1) -> None:
        self.count += amount
        if self.count > self.limit:
            raise self.budget.over(f"more than {self.limit:,} {self.what}")
        if self.count >= self._next_clock:
            self._next_clock = self.count + self.CLOCK_EVERY
            self.check_time()

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise self.budget.over(f"parsing took longer than {self.budget.seconds:g} s")

    def restart(self) -> None:
        """Count from zero again (the deadline stays): e.g. for the next document of one spec."""
        self.count = 0
        self._next_clock = self.CLOCK_EVERY


#: Every format parsed from outside bytes. A parser registry row (services/parsers/__init__.py) names
#: its row here; the spec, discovery and git readers name theirs where they parse.
BUDGETS: dict[str, Budget] = {
    row.name: row
    for row in (
        # --- files (the parser registry) ---
        Budget("text", input_bytes=None, output_chars=64 * MB, structure=0, counts="", depth=0, seconds=30),
        Budget(
            "structured",  # JSON, YAML, TOML: validated; YAML composed by libyaml (nesting capped at 1,000)
            input_bytes=None,
            output_chars=64 * MB,
            structure=4_000_000,
            counts="YAML nodes",
            depth=1000,
            seconds=60,
            isolated=True,
        ),
        Budget(
            "html",  # lxml caps nesting at 255; past `depth` the page is not given to resiliparse
            input_bytes=None,
            output_chars=64 * MB,
            structure=64,
            counts="passes over the main-content reference",
            depth=128,
            seconds=30,
        ),
        Budget(
            "pdf", input_bytes=None, output_chars=64 * MB, structure=0, counts="", depth=0, seconds=120, isolated=True
        ),
        Budget(
            "office",  # DOCX, PPTX, ODT, EPUB: ZIP members and inflated size checked first (archives.py)
            input_bytes=None,
            output_chars=64 * MB,
            structure=10_000,
            counts="archive members",
            depth=0,
            seconds=120,
            isolated=True,
        ),
        Budget(
            "spreadsheet",  # XLSX: cells read and cells written
            input_bytes=None,
            output_chars=64 * MB,
            structure=2_000_000,
            counts="table cells",
            depth=0,
            seconds=120,
            isolated=True,
        ),
        Budget(
            "csv",  # a short row padded to the widest one is where a CSV expands
            input_bytes=None,
            output_chars=64 * MB,
            structure=2_000_000,
            counts="table cells",
            depth=0,
            seconds=30,
        ),
        Budget(
            "rtf", input_bytes=None, output_chars=64 * MB, structure=0, counts="", depth=0, seconds=120, isolated=True
        ),
        # --- OpenAPI specs (services/openapi), from files, URLs, crawls and syncs ---
        Budget(
            "openapi",
            input_bytes=None,
            output_chars=32 * MB,  # every document of the spec together
            structure=200_000,  # per document: the renderer follows at most this many schema nodes
            counts="schema nodes visited for one operation",
            depth=32,  # a chain of $refs to $refs
            seconds=120,
            isolated=True,
        ),
        Budget(
            "yaml-aliases",  # while loading a YAML spec: what aliases add, counted on the composed graph
            input_bytes=None,
            output_chars=0,
            structure=1_000_000,
            counts="nodes and characters added by YAML aliases",
            depth=1000,
            seconds=60,
        ),
        # --- crawl discovery (services/crawl/discovery.py, services/net/robots.py) ---
        Budget(
            "sitemap",  # no DTD, no entities (defusedxml); 50,000 URLs is the protocol's own maximum
            input_bytes=2 * MB,
            output_chars=0,
            structure=200_000,
            counts="XML elements",
            depth=16,
            seconds=10,
        ),
        Budget(
            "robots",  # RFC 9309 asks crawlers to parse at least 500 KiB
            input_bytes=512 * 1024,
            output_chars=0,
            structure=10_000,
            counts="Allow/Disallow rules",
            depth=0,
            seconds=5,
        ),
        Budget("llms", input_bytes=2 * MB, output_chars=0, structure=20_000, counts="links", depth=0, seconds=5),
        # --- the symbol table of synced code (services/code/symbols.py): capped, never refused ---
        Budget(
            "code-symbols",
            input_bytes=4 * MB,  # a larger file (a minified bundle) keeps its chunks and lines, no symbols
            output_chars=0,
            structure=100_000,
            counts="symbols kept per file (definitions, then references by line)",
            depth=0,
            seconds=10,
        ),
        # --- git sources (services/sync/git) ---
        Budget(
            "git-tree",
            input_bytes=16 * MB,  # one tree object
            output_chars=0,
            structure=500_000,
            counts="tree entries walked",
            depth=256,
            seconds=120,
        ),
        Budget(
            "git-pack",  # one fetched pack, landed by services/sync/git/packs.py (deflate reaches ~1000:1)
            input_bytes=None,  # the pack itself: ARCHIVIST_GIT_MAX_PACK_MB, counted as it arrives
            output_chars=0,
            structure=8 * 1024 * MB,
            counts="bytes inflated from the pack (declared sizes, counted before inflating)",
            depth=0,
            seconds=600,
            isolated=True,  # landed in the parser pool: a miscount costs a worker, not the server
        ),
        Budget(
            "git-deltas",  # resolving a pack's deltas with a 96 MB base cache (services/sync/git/deltas.py)
            input_bytes=None,
            output_chars=0,
            structure=1024 * MB,
            counts="bytes re-inflated to rebuild delta bases evicted from the base cache",
            depth=0,
            seconds=600,
            isolated=True,
        ),
        Budget(
            "git-blob",  # read only once its header says it fits
            input_bytes=None,
            output_chars=0,
            structure=0,
            counts="",
            depth=0,
            seconds=60,
        ),
    )
}


def budget(name: str) -> Budget:
    """The budget named `name` (KeyError for a format without one: add its row above)."""
    return BUDGETS[name]
