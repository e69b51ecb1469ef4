"""Schemas of the operator's-view endpoints: ``/overview``, ``/queues/series``, ``/job-etas``,
``/whatif``. Never ORM rows."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class QueueNowOut(BaseModel):
    path: str
    is_leaf: bool
    configured: float | None = Field(description="Capacity the RM holds, % of the parent.")
    desired: float | None = Field(description="The policy's target at its last decision, %.")
    pushed: float | None = Field(description="Capacity the sidecar last wrote, %.")
    weight: float | None
    share: float | None = Field(description="Measured dominant share of the cluster, 0-1.")
    debt: float | None = Field(description="LTRF debt, vcore-seconds.")
    discrimination: float | None = Field(description="Fawkes D_i.")
    used_capacity: float | None = Field(description="% of the queue's own capacity in use.")
    used_vcores: int | None
    pending_containers: int | None
    running_apps: int | None
    drift: bool


class OverviewOut(BaseModel):
    cluster: str
    policy: str | None
    mode: str | None
    last_good_poll_at: dt.datetime | None
    last_decision_at: dt.datetime | None
    queues: list[QueueNowOut]
    jobs_by_state: dict[str, int]
    deadlines: dict[str, int] = Field(description="Finished deadline jobs: met and missed.")
    pushes_by_outcome: dict[str, int]
    controller_by_status: dict[str, int]


class QueueSeriesOut(BaseModel):
    path: str
    t: list[dt.datetime] = Field(description="Sample times.")
    capacity: list[float] = Field(description="Configured capacity at each sample, %.")
    used_capacity: list[float] = Field(description="% of the queue's capacity in use.")
    absolute_used: list[float] = Field(description="% of the cluster in use by the queue.")
    decision_t: list[dt.datetime] = Field(description="Controller decision times.")
    weight: list[float | None]
    desired: list[float | None] = Field(description="Target capacity at each decision, %.")
    debt_t: list[dt.datetime] = Field(description="Ledger interval ends.")
    debt: list[float] = Field(description="LTRF debt at each interval end, vcore-seconds.")


class JobEtaOut(BaseModel):
    progress: float = Field(description="The application's progress, 0-100.")
    eta: dt.datetime | None = Field(description="Finish time, or its extrapolation from progress.")
    app_state: str


class WhatIfIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    policy: str = Field(description="A simulator policy: fair, fawkes:TD, ltrf, justice, ...")
    since: str | None = Field(
        "7d", max_length=32, description="How far back: 7d, 12h, 30m; null for all."
    )
    until: dt.datetime | None = Field(None, description="End of the period (default now).")
    capacity_vcores: int | None = Field(None, description="Default: the cluster's vcores.")
    params: dict[str, Any] = Field(default_factory=dict, description="Policy parameters.")
    interval_s: float = Field(60.0, description="Controller interval of queue policies.")


class WhatIfRunOut(BaseModel):
    id: str
    policy: str
    status: str = Field(description="queued, running, done or failed.")
    phase: str
    progress: float = Field(description="0-1.")
    created_at: dt.datetime | None
    finished_at: dt.datetime | None
    error: str | None
    result: dict[str, Any] | None = Field(
        description="When done: per-queue slowdown, deadlines met, utilization, actual vs replay."
    )
    report_url: str | None


class WhatIfList(BaseModel):
    items: list[WhatIfRunOut]


class WhatIfPolicies(BaseModel):
    policies: list[str]
    need_deadlines: list[str] = Field(description="Policies that need a deadline per job.")
