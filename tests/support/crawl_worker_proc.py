"""A standalone crawl worker process, for the test that SIGKILLs a worker mid-crawl.

Usage: `python tests/support/crawl_worker_proc.py WORKER_ID [JOBS]`, with DATABASE_URL and ARCHIVIST_* settings in the
environment. Runs `services.app.run_standalone_worker` (what `archivist worker` runs) until
SIGTERM/SIGINT, or until it is killed.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from services.app import run_standalone_worker  # noqa: E402
from services.core.settings import Settings  # noqa: E402 - after the sys.path fix above

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    worker_id = sys.argv[1] if len(sys.argv) > 1 else None
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    asyncio.run(run_standalone_worker(Settings(_env_file=None), worker_id, jobs))
