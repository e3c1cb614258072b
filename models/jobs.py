"""Pydantic types for jobs: their parameters (one model per kind), requests, counters and errors.

A job is a crawl (or recrawl) of a site, a sync of a folder or a sync of a git repository. Its `params`
say what it follows, discriminated on their own `kind` ("crawl", "folder", "git"). Jobs queued before
the kinds had their own parameters stored every job's as CrawlParams (a folder as a file:// URL): they
still load, read in the old shape by the job's kind (`stored_params`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote, urlsplit
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, model_validator

JobStatus = Literal["queued", "running", "completed", "completed_with_errors", "failed", "cancelled"]
#: what a job does; a git sync ('git') shows as a sync ('sync'), which is what agents asked for
JobKind = Literal["crawl", "recrawl", "sync", "git"]
CrawlScope = Literal["same-host", "same-domain", "under-path"]

JOB_STATUSES: tuple[str, ...] = ("queued", "running", "completed", "completed_with_errors", "failed", "cancelled")
ACTIVE_STATUSES: tuple[str, ...] = ("queued", "running")
#: The kinds that crawl a website (the others sync a folder or a git repository).
CRAWL_KINDS: tuple[str, ...] = ("crawl", "recrawl")
FINISHED_STATUSES: tuple[str, ...] = ("completed", "completed_with_errors", "failed", "cancelled")
#: ran to its end with some pages or files failed: shown as a warning, never as plain success
WARNING_STATUSES: tuple[str, ...] = ("completed_with_errors",)


def ended_status(failed: int) -> str:
    """The status of a job whose work ran to its end: completed, or completed_with_errors if any item failed."""
    return "completed_with_errors" if failed else "completed"


class JobRights(BaseModel):
    """What a job may do, decided when it is queued from the caller's settings and scope, stored with the
    job (sql/041) and honoured by whichever worker runs it: a worker that cannot (a folder outside its
    own allowed paths, private addresses its settings refuse) leaves the job to one that can."""

    model_config = ConfigDict(frozen=True)

    #: the folders the job reads (a folder sync's), resolved when it was queued
    paths: list[str] = Field(default_factory=list)
    #: the queueing process's ARCHIVIST_ALLOWED_PATHS (or the caller's profiles' paths)
    allowed_paths: list[str] = Field(default_factory=list)
    #: whether the queueing process allowed private and loopback addresses (ARCHIVIST_CRAWL_ALLOW_PRIVATE)
    allow_private: bool = False
    #: whom the job acts for (the caller's name) and through which profiles (none: the owner)
    acts_for: str | None = None
    profiles: list[str] = Field(default_factory=list)
    #: the environment variables the job may read secrets from (a login's env: references)
    secret_names: list[str] = Field(default_factory=list)
    #: the process that queued it (host:pid), named when no worker can honour the job
    queued_by: str = ""

    def describe(self, secrets: bool = False) -> str:
        """A process's settings, as a failure names them; with the secret variables set when the job
        sends any (`secrets`: name them even when there are none, for the worker's side)."""
        paths = os.pathsep.join(self.allowed_paths) or "(none)"
        private = "true" if self.allow_private else "false"
        described = f"ARCHIVIST_ALLOWED_PATHS={paths}, ARCHIVIST_CRAWL_ALLOW_PRIVATE={private}"
        if self.secret_names or secrets:
            described += f", secret variables set: {', '.join(self.secret_names) or '(none)'}"
        return described


class CrawlParams(BaseModel):
    """What to crawl; stored with the job so a recrawl repeats it exactly."""

    kind: Literal["crawl"] = "crawl"
    url: str
    # Links are followed unless a caller says not to: the same default through MCP, the CLI and the console.
    recursive: bool = True
    max_depth: int = 2
    max_pages: int = 20
    include_patterns: list[str] = Field(default_factory=list)
    exclude_patterns: list[str] = Field(default_factory=list)
    scope: CrawlScope = "same-host"
    # Documentation behind a login: {name: "env:VARIABLE"} references only, never values
    # (services/net/credentials.py reads the variables when a worker starts the job).
    headers: dict[str, str] = Field(default_factory=dict)
    cookies: dict[str, str] = Field(default_factory=dict)
    auth_hosts: list[str] = Field(default_factory=list)  # more hosts that get them (the start URL's host does)

    @property
    def depth_limit(self) -> int:
        """The deepest level followed: 0 (the start page only) unless the crawl is recursive."""
        return self.max_depth if self.recursive else 0

    def shown(self) -> CrawlParams:
        """The parameters as agents see them (every kind shows this shape)."""
        return self


class FolderSyncParams(BaseModel):
    """What a folder sync follows (the source's binding when it was queued, services/sync/)."""

    kind: Literal["folder"] = "folder"
    path: str
    recursive: bool = True
    include_patterns: list[str] = Field(default_factory=list)
    exclude_patterns: list[str] = Field(default_factory=list)

    def shown(self) -> CrawlParams:
        """As agents have always seen a folder sync's parameters: the folder as a file:// URL."""
        return CrawlParams(
            url=Path(self.path).as_uri(),
            recursive=self.recursive,
            include_patterns=self.include_patterns,
            exclude_patterns=self.exclude_patterns,
        )


class GitSyncParams(BaseModel):
    """What a git sync follows (the source's binding when it was queued, services/sync/git/)."""

    kind: Literal["git"] = "git"
    url: str
    include_patterns: list[str] = Field(default_factory=list)
    exclude_patterns: list[str] = Field(default_factory=list)

    def shown(self) -> CrawlParams:
        """As agents have always seen a git sync's parameters: the repository's URL and the patterns."""
        return CrawlParams(url=self.url, include_patterns=self.include_patterns, exclude_patterns=self.exclude_patterns)


JobParams = Annotated[CrawlParams | FolderSyncParams | GitSyncParams, Field(discriminator="kind")]
#: the kind of parameters each kind of job has
PARAMS_OF_KIND: dict[str, str] = {"crawl": "crawl", "recrawl": "crawl", "sync": "folder", "git": "git"}


def stored_params(job_kind: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """A job's stored parameters in today's shape: a row queued before the kinds had their own (no
    `kind`; a sync's as CrawlParams, its folder a file:// URL) is read by the job's kind."""
    values = dict(params)
    if "kind" in values:
        return values
    shape = PARAMS_OF_KIND.get(job_kind, "crawl")
    patterns = {name: values.get(name) or [] for name in ("include_patterns", "exclude_patterns")}
    url = str(values.get("url") or "")
    if shape == "folder":
        path = unquote(urlsplit(url).path) if url.startswith("file:") else url  # urllib.request opens sockets
        return {"kind": "folder", "path": path, "recursive": values.get("recursive", True), **patterns}
    if shape == "git":
        return {"kind": "git", "url": url, **patterns}
    return {**values, "kind": "crawl"}


class CrawlRequest(BaseModel):
    """A crawl as asked for, built once at the edge (crawl_website, the CLI, the console) and checked by
    services.crawl.service.CrawlService. None means: the default (start), or the value of the crawl
    being repeated (recrawl). Values are checked there (scope, limits, patterns, login references), so
    every edge gets the same errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str | None = None
    source_id: str | UUID | None = None
    job_id: str | UUID | None = None  # recrawl: repeat this job's settings
    title: str | None = None  # start: the source to find or create (default: the URL's host)
    source_must_exist: bool | None = None  # start: a title naming no source is NOT_FOUND, never created
    recursive: bool | None = None
    max_depth: int | None = None
    max_pages: int | None = None
    include_patterns: list[str] | None = None
    exclude_patterns: list[str] | None = None
    scope: str | None = None
    headers: dict[str, Any] | None = None  # {name: "env:VARIABLE"}
    cookies: dict[str, Any] | None = None
    auth_hosts: list[str] | None = None

    def given(self) -> dict[str, Any]:
        """The crawl parameters this request sets (CrawlParams fields that are not None)."""
        values = self.model_dump(include=set(CrawlParams.model_fields))
        return {name: value for name, value in values.items() if value is not None}


class SyncRequest(BaseModel):
    """A folder sync as asked for, built once at the edge (crawl_website sync, the CLI): bind
    `folder_path` (to `source_id`, an existing binding, or a new source titled `title`), or sync the
    source `source_id` by its kind (services/refresh/)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    folder_path: str | None = None
    source_id: str | UUID | None = None
    title: str | None = None
    include_patterns: list[str] | None = None
    exclude_patterns: list[str] | None = None
    recursive: bool | None = None


class GitSyncRequest(BaseModel):
    """A git sync as asked for, built once at the edge: bind `git_url` first when given (see
    services.sync.git.GitService.bind), then sync the source."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    git_url: str | None = None
    source_id: str | UUID | None = None
    title: str | None = None
    ref: str | None = None
    include_patterns: list[str] | None = None
    exclude_patterns: list[str] | None = None
    auth_env: str | None = None
    browse_url: str | None = None


class PageError(BaseModel):
    """One page that could not be crawled."""

    url: str
    error: str
    http_status: int | None = None


class Job(BaseModel):
    """A job of any kind (a crawl, a folder sync, a git sync) with its counters (computed from its frontier)."""

    id: UUID
    #: None once a failed crawl's own empty source was removed (sql/029)
    source_id: UUID | None = None
    kind: JobKind
    status: JobStatus
    params: JobParams
    #: None: queued before jobs carried their rights (run with the claiming worker's settings)
    rights: JobRights | None = None
    pages_crawled: int = 0
    pages_failed: int = 0
    pages_pending: int = 0
    pages_skipped: int = 0
    skipped_by_reason: dict[str, int] = Field(default_factory=dict)
    documents_created: int = 0
    documents_updated: int = 0
    documents_unchanged: int = 0
    documents_deleted: int = 0
    total_chunks: int = 0
    #: pages stored: keyword-searchable (two-phase indexing), embedded or not
    pages_searchable: int = 0
    #: of the chunks this job wrote: embedded, and still waiting in the embedding backlog
    chunks_embedded: int = 0
    chunks_pending: int = 0
    #: seconds until its pending chunks are embedded, at the last minute's rate (None: no rate yet)
    embedding_eta_seconds: float | None = None
    error: str | None = None
    warnings: list[str] = Field(default_factory=list)
    recent_errors: list[PageError] = Field(default_factory=list)
    cancel_requested: bool = False
    worker_id: str | None = None
    attempts: int = 0
    created_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None
    heartbeat_at: datetime | None = None

    @model_validator(mode="before")
    @classmethod
    def _stored_params(cls, data: Any) -> Any:
        """Parameters stored before the kinds had their own are read by the job's kind."""
        if isinstance(data, Mapping) and isinstance(data.get("params"), Mapping) and "kind" in data:
            return {**data, "params": stored_params(str(data["kind"]), data["params"])}
        return data

    @property
    def shown_params(self) -> CrawlParams:
        """The parameters as agents and the command line have always seen them, for every kind."""
        return self.params.shown()

    def crawl_params(self) -> CrawlParams:
        """The parameters of a crawl or recrawl (a sync has none: TypeError)."""
        if not isinstance(self.params, CrawlParams):
            raise TypeError(f"a {self.kind} job has no crawl parameters")
        return self.params

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATUSES

    def embedding_progress(self) -> str | None:
        """'embedded 1,467 / 3,161 chunks, about 2 min left' while chunks this job wrote wait for their
        embeddings (keyword-searchable already), None once all have them: the one sentence every door shows."""
        if self.chunks_pending <= 0:
            return None
        total = self.chunks_embedded + self.chunks_pending
        return f"embedded {self.chunks_embedded:,} / {total:,} chunks, {about_left(self.embedding_eta_seconds)}"

    @property
    def shown_kind(self) -> str:
        """The kind as agents and people see it: crawl, recrawl or sync (of a folder or a git repository)."""
        return "sync" if self.kind == "git" else self.kind

    def counters(self) -> dict[str, Any]:
        """The page and document counts, as shown to agents and on the command line."""
        return self.model_dump(
            include={
                "pages_crawled",
                "pages_failed",
                "pages_pending",
                "pages_skipped",
                "skipped_by_reason",
                "documents_created",
                "documents_updated",
                "documents_unchanged",
                "documents_deleted",
                "total_chunks",
                "pages_searchable",
                "chunks_embedded",
                "chunks_pending",
                "embedding_eta_seconds",
            }
        )


def about_left(seconds: float | None) -> str:
    """'about 2 min left' (rounded up), 'under a minute left', or 'time left not known yet'."""
    if seconds is None:
        return "time left not known yet"
    if seconds < 60:
        return "under a minute left"
    if seconds < 3600:
        return f"about {-(-int(seconds) // 60)} min left"
    return f"about {seconds / 3600:.1f} h left"


#: the name of Job before folder and git syncs had parameters of their own
CrawlJob = Job


class StartedJob(BaseModel):
    """The answer to starting a crawl, a recrawl or a sync."""

    job: Job
    source_created: bool = False
    notes: list[str] = Field(default_factory=list)
