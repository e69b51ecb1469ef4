"""Response and request schemas of the HTTP API (never ORM rows)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, Field


def ms_to_utc(ms: int) -> dt.datetime:
    """Epoch milliseconds to an aware UTC datetime."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def ms_to_dt(ms: int | None) -> dt.datetime | None:
    """Epoch ms to an aware UTC datetime; ``None`` and the RM's 0 (unset) give ``None``."""
    if not ms:
        return None
    return ms_to_utc(ms)


class Health(BaseModel):
    status: str = Field(description="Always 'ok' when the process answers.")
    version: str


class ReadyCheck(BaseModel):
    ok: bool
    detail: str


class Ready(BaseModel):
    ready: bool
    mode: str
    database: ReadyCheck
    resourcemanager: ReadyCheck
    last_good_poll: dt.datetime | None
    last_good_poll_age_s: float | None = Field(description="Seconds since the last good poll.")
    active_rm_url: str | None
    leadership: dict[str, Any] | None = Field(
        None,
        description="role (leader or follower) of this process, its identity (host:pid), the "
        "current leader and epoch; null when the loops do not run in this process.",
    )


class QueueOut(BaseModel):
    path: str
    name: str
    parent: str | None
    is_leaf: bool
    state: str
    configured_capacity: float = Field(description="Configured capacity, % of the parent.")
    configured_max_capacity: float
    sampled_at: dt.datetime | None
    capacity: float | None = None
    max_capacity: float | None = None
    used_capacity: float | None = Field(None, description="% of the queue's own capacity in use.")
    absolute_capacity: float | None = None
    absolute_used_capacity: float | None = None
    used_vcores: int | None = None
    used_memory_mb: int | None = None
    pending_vcores: int | None = None
    pending_memory_mb: int | None = None
    pending_containers: int | None = None
    running_apps: int | None = None
    pending_apps: int | None = None


class QueueList(BaseModel):
    items: list[QueueOut]


class AppOut(BaseModel):
    app_id: str
    user: str
    queue: str
    name: str
    app_type: str
    tags: list[str]
    state: str
    final_status: str
    progress: float
    submitted_at: dt.datetime | None
    started_at: dt.datetime | None
    launched_at: dt.datetime | None
    finished_at: dt.datetime | None
    elapsed_ms: int
    allocated_vcores: int
    allocated_mb: int
    vcore_seconds: int
    memory_seconds: int
    running_containers: int
    priority: int
    diagnostics: str
    first_seen_at: dt.datetime | None
    updated_at: dt.datetime | None


class AppPage(BaseModel):
    items: list[AppOut]
    next_cursor: str | None = Field(
        description="Pass as ?cursor= for the next page; null at the end."
    )


class ErrorOut(BaseModel):
    detail: str
