"""How `make test` hands test files to its xdist workers: a file at a time (`--dist loadfile`), except
files that share an expensive start, which go to one worker together.

The files that use the sentence-transformers provider each make their worker import torch,
transformers and scikit-learn (~14 s of CPU, once per process): spread over the workers they paid it
on each; together, once. Module fixtures stay per file (each file is still its own module on that
worker); only which worker runs it changes.
"""

from __future__ import annotations

from typing import Any

#: Files run by one worker, one after the other, by the name of what they share.
SAME_WORKER: dict[str, str] = {
    "tests/embeddings/test_embeddings.py": "torch",
    "tests/embeddings/test_reranking.py": "torch",
    "tests/documents/test_reembed.py": "torch",
    "tests/documents/test_backup.py": "torch",
}


def work_unit(path: str) -> str:
    """The unit a test file is scheduled in: its group, or the file itself."""
    group = SAME_WORKER.get(path)
    return f"group:{group}" if group else path


def grouped_seconds(seconds: dict[str, float]) -> dict[str, float]:
    """Each work unit's seconds (a group's: the sum of its files'), to order units longest first."""
    totals: dict[str, float] = {}
    for path, value in seconds.items():
        totals[work_unit(path)] = totals.get(work_unit(path), 0.0) + value
    return totals


def make_scheduler(config: Any, log: Any) -> Any:
    """A loadfile scheduler whose work units are `work_unit`'s (xdist imported only when it runs)."""
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]

    class GroupedFileScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid.split("::", 1)[0])

    return GroupedFileScheduling(config, log)
