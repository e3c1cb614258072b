"""`archivist sync` from the shell: binds a directory on first use, shows a progress bar, prints exact counts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.cli_process import run_in_process

ROOT = Path(__file__).resolve().parents[2]


def archivist(*args: str, database_url: str, allowed: Path, process: bool = False) -> subprocess.CompletedProcess[str]:
    """`archivist sync ...`: a real process for the first sync, the entry function in this process after."""
    env = {**os.environ, "DATABASE_URL": database_url, "ARCHIVIST_ALLOWED_PATHS": str(allowed)}
    if not process:
        return run_in_process(list(args), env)
    command = [sys.executable, "-c", "import cli; cli.main()", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)


def test_sync_command(database_url: str, files_dir: Path) -> None:
    folder = files_dir / "shell"
    folder.mkdir()
    (folder / "one.md").write_text("# One\n\nThe first file synced from the shell.\n")
    (folder / "two.md").write_text("# Two\n\nThe second file synced from the shell.\n")
    first = archivist(
        "sync", str(folder), "--title", "Shell notes", database_url=database_url, allowed=files_dir, process=True
    )
    assert first.returncode == 0, first.stderr[-2000:]
    assert "2 created, 0 updated, 0 unchanged, 0 deleted, 0 failed" in first.stdout, first.stdout
    assert "syncing" in first.stderr and "2/2" in first.stderr
    (folder / "two.md").unlink()
    again = archivist("sync", "Shell notes", database_url=database_url, allowed=files_dir)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "0 created, 0 updated, 1 unchanged, 1 deleted" in again.stdout, again.stdout
    missing = archivist("sync", "No such source", database_url=database_url, allowed=files_dir)
    assert missing.returncode == 1 and "No folder source matches" in missing.stderr
