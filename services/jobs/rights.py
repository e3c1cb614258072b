"""What a job may do (models.jobs.JobRights), decided when it is queued, and what a worker can honour.

A job used to run with the settings of whichever process claimed it: the server's in-process worker
took a CLI's folder sync and refused it (no allowed paths), and a crawl queued with private addresses
allowed failed its pages as loopback when another process resumed it. Now the queueing process's
settings and the caller's scope are stored with the job, and a worker claims only the jobs it can
honour (services/jobs/sql.py honours())."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from models.jobs import JobRights
from services.access.scope import Scope
from services.access.secret_gate import held_variables
from services.core.settings import Settings

ENV_PREFIX = "env:"


def process_name() -> str:
    """host:pid of this process, as a failure names it."""
    return f"{socket.gethostname()}:{os.getpid()}"


def resolved(paths: list[Path] | tuple[str, ...] | list[str]) -> list[str]:
    """Each path made absolute and real, as the claim query compares them."""
    return [str(Path(p).expanduser().resolve()) for p in paths]


def job_rights(
    params: Mapping[str, Any], scope: Scope, settings: Settings, secret_names: Sequence[str] = ()
) -> JobRights:
    """The rights of a job queued now by the caller `scope` in this process. `secret_names`: variables
    the job reads beyond its login's `env:` references (a git sync's auth_env, kept with its binding)."""
    roots = settings.allowed_paths if scope.allowed_paths is None else list(scope.allowed_paths)
    folders = [params["path"]] if params.get("kind") == "folder" and params.get("path") else []
    references = [*dict(params.get("headers") or {}).values(), *dict(params.get("cookies") or {}).values()]
    named = {str(v)[len(ENV_PREFIX) :] for v in references if str(v).startswith(ENV_PREFIX)}
    secrets = sorted(named | {name for name in secret_names if name})
    return JobRights(
        paths=resolved(folders),
        allowed_paths=resolved(roots),
        allow_private=settings.crawl_allow_private,
        acts_for=scope.who,
        profiles=list(scope.profiles),
        secret_names=secrets,
        queued_by=process_name(),
    )


def worker_rights(settings: Settings) -> tuple[bool, list[str], list[str]]:
    """What this worker can honour: private addresses, folders under its own allowed roots, and the
    secrets it holds (the names of its environment variables that are set; never their values)."""
    return settings.crawl_allow_private, resolved(settings.allowed_paths), held_variables()


def honoured_settings(settings: Settings, rights: JobRights | None) -> Settings:
    """This worker's settings narrowed to the job's rights: private addresses only if the job was queued
    with them allowed (the claim already left the job alone if this worker refuses them)."""
    if rights is None or rights.allow_private or not settings.crawl_allow_private:
        return settings
    return settings.model_copy(update={"crawl_allow_private": False})


def honours(rights: JobRights | None, allow_private: bool, roots: list[str], secrets: list[str] | None = None) -> bool:
    """Whether a worker with these settings can run a job with these rights (as sql.honours() asks).
    `secrets` None: not known (another process's registry entry), not checked."""
    if rights is None:
        return True
    if rights.allow_private and not allow_private:
        return False
    if secrets is not None and not set(rights.secret_names) <= set(secrets):
        return False
    return all(any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots) for path in rights.paths)
