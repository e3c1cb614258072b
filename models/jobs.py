"""Pydantic types for crawl jobs: their parameters, counters and errors."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

JobStatus = Literal["queued", "running", "completed", "failed", "cancelled"]
#: what a job does; a git sync ('git') shows as a sync ('sync'), which is what agents asked for
JobKind = Literal["crawl", "recrawl", "sync", "git"]
CrawlScope = Literal["same-host", "same-domain", "under-path"]

JOB_STATUSES: tuple[str, ...] = ("queued", "running", "completed", "failed", "cancelled")
ACTIVE_STATUSES: tuple[str, ...] = ("queued", "running")
#: The kinds that crawl a website (the others sync a folder or a git repository).
CRAWL_KINDS: tuple[str, ...] = ("crawl", "recrawl")
FINISHED_STATUSES: tuple[str, ...] = ("completed", "failed", "cancelled")


class CrawlParams(BaseModel):
    """What to crawl; stored with the job so a recrawl repeats it exactly."""

    url: str
    recursive: bool = False
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


class PageError(BaseModel):
    """One page that could not be crawled."""

    url: str
    error: str
    http_status: int | None = None


class CrawlJob(BaseModel):
    """A crawl job with its counters (computed from its URL frontier)."""

    id: UUID
    #: None once a failed crawl's own empty source was removed (sql/029)
    source_id: UUID | None = None
    kind: JobKind
    status: JobStatus
    params: CrawlParams
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

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATUSES

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


class StartedJob(BaseModel):
    """The answer to starting a crawl or recrawl."""

    job: CrawlJob
    source_created: bool = False
    notes: list[str] = Field(default_factory=list)
