"""The per-file Python work of a code sync, without a database: CPU seconds of each step.

    nice -n 10 .venv/bin/python bench/code_nav_cpu.py [--every 8] [--profile]

For the standard library files bench/code_nav.py syncs (every `--every`-th), what the worker does to
each file besides its SQL: parse (the verbatim text parser), chunk (tree-sitter, services/chunking/
code.py), injection flags (services/flags), symbols (services/code/symbols.py, qualified references)
and line blocks (services/code/lines.py). `--profile` adds a cProfile table (which inflates each step).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.code_nav import stdlib_files  # noqa: E402
from services.chunking import get_chunker  # noqa: E402
from services.code.lines import blocks  # noqa: E402
from services.code.symbol_store import file_symbols  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from services.flags import chunk_flags  # noqa: E402
from services.parsers import parse_bytes  # noqa: E402


def main(args: argparse.Namespace) -> None:
    files = stdlib_files(None, args.every)
    settings = Settings(_env_file=None)
    seconds = dict.fromkeys(("parse", "chunk", "flags", "symbols", "lines"), 0.0)
    profile = cProfile.Profile() if args.profile else None
    if profile:
        profile.enable()
    for path, text in files.items():
        t = time.process_time()
        parsed = parse_bytes(text.encode(), Path(path), settings.max_file_bytes)
        seconds["parse"] += time.process_time() - t
        metadata = {"file_path": path, "path": path, **parsed.metadata}
        t = time.process_time()
        chunker = get_chunker(settings, document_type=parsed.document_type, metadata=metadata)
        chunks = chunker.chunk(parsed.content)
        seconds["chunk"] += time.process_time() - t
        t = time.process_time()
        chunk_flags(parsed.title or path, chunks, metadata)
        seconds["flags"] += time.process_time() - t
        t = time.process_time()
        file_symbols(parsed.content, metadata)
        seconds["symbols"] += time.process_time() - t
        t = time.process_time()
        list(blocks(parsed.content))
        seconds["lines"] += time.process_time() - t
    if profile:
        profile.disable()
    parts = ", ".join(f"{k} {v:.2f} s" for k, v in seconds.items())
    print(f"{len(files)} files: {parts}; all {sum(seconds.values()):.2f} s CPU")
    if profile:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=8)
    parser.add_argument("--profile", action="store_true")
    main(parser.parse_args())
