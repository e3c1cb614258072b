"""Pydantic types for profiles, access tokens and the audit log."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field

from models import SearchType


class Profile(BaseModel):
    """A named scope: an ordered list of sources, default search settings and flags."""

    name: str
    description: str = ""
    source_ids: list[UUID] = Field(default_factory=list)
    search_type: SearchType | None = None
    match_count: int | None = None
    similarity_threshold: float | None = None
    keyword_weight: float | None = None
    read_only: bool = False
    enabled: bool = True
    #: directories a caller confined to this profile may read files under (inside the server's
    #: ARCHIVIST_ALLOWED_PATHS); None = not set: no files
    allowed_paths: list[str] | None = None
    #: leave chunks with injection flags (and chunks not scanned yet) out of searches as this profile
    exclude_flagged: bool = False
    #: output settings (services/access/profile_settings.py): a hit's text cut at this many characters
    #: (None: 1,000), and the fields a hit carries beside the core ones (None: every field)
    snippet_chars: int | None = None
    hit_fields: list[str] | None = None
    created_at: datetime
    updated_at: datetime


class AccessToken(BaseModel):
    """A bearer token's record; the secret itself is never stored (only its SHA-256)."""

    id: UUID
    name: str
    prefix: str
    profiles: list[str] = Field(default_factory=list)
    read_only: bool = False
    rate_per_minute: int | None = None
    max_running_jobs: int | None = None
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None
    created_at: datetime

    @property
    def active(self) -> bool:
        from datetime import UTC

        now = datetime.now(UTC)
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


class AuditEntry(BaseModel):
    id: int
    at: datetime
    tool: str
    action: str | None = None
    who: str
    profiles: list[str] = Field(default_factory=list)
    arguments: dict[str, Any] = Field(default_factory=dict)
    error_code: str | None = None
    #: a failed call's error message, redacted and cut (services/access/audit.py)
    error_message: str | None = None
    latency_ms: float
    response_bytes: int = 0
