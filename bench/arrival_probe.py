"""CPU and memory of a benchmark run: this process (the Archivist server), its children, and the
embedded PostgreSQL's processes (found through postmaster.pid: pgserver daemonises them)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil


def postgres_processes(pgdata: Path | None) -> list[psutil.Process]:
    """The postmaster of `pgdata` and its backends (none when the database is not embedded)."""
    pid_file = pgdata / "postmaster.pid" if pgdata else None
    if pid_file is None or not pid_file.is_file():
        return []
    try:
        postmaster = psutil.Process(int(pid_file.read_text().split()[0]))
        return [postmaster, *postmaster.children(recursive=True)]
    except (psutil.Error, ValueError, IndexError):
        return []


def cpu_seconds(processes: list[psutil.Process]) -> float:
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue  # a backend that ended: its time is lost (small: backends are pooled)
        total += times.user + times.system + times.children_user + times.children_system
    return total


@dataclass
class Sample:
    at: float  # seconds since the probe started
    server_cpu: float  # CPU seconds of this process and its children
    postgres_cpu: float  # CPU seconds of PostgreSQL's processes alive at the sample


@dataclass
class Probe:
    """Samples CPU seconds and RSS; `utilisation(a, b)` is the share of every core busy between two samples."""

    pgdata: Path | None
    cores: int = field(default_factory=lambda: len(os.sched_getaffinity(0)))
    began: float = field(default_factory=time.perf_counter)
    peak_server_rss: int = 0
    peak_postgres_rss: int = 0
    samples: list[Sample] = field(default_factory=list)

    def sample(self) -> Sample:
        me = psutil.Process()
        postgres = postgres_processes(self.pgdata)
        self.peak_server_rss = max(self.peak_server_rss, me.memory_info().rss)
        self.peak_postgres_rss = max(self.peak_postgres_rss, _rss(postgres))
        taken = Sample(time.perf_counter() - self.began, cpu_seconds([me]), cpu_seconds(postgres))
        self.samples.append(taken)
        return taken

    def utilisation(self, first: Sample, last: Sample) -> dict[str, float]:
        """Share of all cores used between two samples: server, PostgreSQL and both."""
        wall = max(last.at - first.at, 1e-9) * self.cores
        server = (last.server_cpu - first.server_cpu) / wall
        postgres = max(last.postgres_cpu - first.postgres_cpu, 0.0) / wall
        return {"server": round(server, 3), "postgres": round(postgres, 3), "total": round(server + postgres, 3)}


def _rss(processes: list[psutil.Process]) -> int:
    """Resident memory of a process group without counting shared pages more than once (USS + the
    postmaster's shared memory once), falling back to plain RSS."""
    total = 0
    for i, process in enumerate(processes):
        try:
            info = process.memory_full_info()
            total += info.rss if i == 0 else info.uss
        except psutil.Error:
            continue
    return total
