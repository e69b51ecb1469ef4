"""Response and request bodies of the MapReduce history: ``GET /apps/{id}``'s ``mapreduce``
section and the profile endpoints (``app.api.routes.profiles``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas import AppOut


class TaskOut(BaseModel):
    task_id: str
    kind: str = Field(description="MAP or REDUCE.")
    state: str
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    elapsed_ms: int


class PhaseOut(BaseModel):
    duration_ms: int = Field(
        description="Map: first map start to last map finish; reduce: from there to the job's "
        "finish."
    )
    tasks: int
    avg_task_ms: dict[str, int] = Field(
        description="The JobHistory server's averages per task (map; shuffle, merge, reduce)."
    )
    peak_vcores: float = Field(description="Most tasks of the phase at once x vcores per task.")


class MapReduceOut(BaseModel):
    status: str = Field(
        description="ok: stored; retry: the JobHistory server did not know the job yet; "
        "missing: it never did (the collector gave up)."
    )
    attempts: int
    fetched_at: dt.datetime | None
    last_error: str | None
    job_id: str | None
    state: str | None
    maps_total: int
    maps_completed: int
    reduces_total: int
    reduces_completed: int
    phases: dict[str, PhaseOut]
    input_bytes: int
    output_bytes: int
    shuffle_bytes: int
    spilled_records: int
    cpu_ms: int
    vcore_ms: int
    cluster_vcores: float = Field(description="The cluster's vcores when the history was read.")
    counters: dict[str, dict[str, list[int]]] = Field(
        description="{group: {counter: [total, map, reduce]}} as the JobHistory server reports."
    )
    tasks: list[TaskOut]


class AppDetailOut(AppOut):
    mapreduce: MapReduceOut | None = Field(
        None,
        description="The job's history from the MapReduce JobHistory server "
        "(YARN_SIDECAR_JOBHISTORY_URL); null for other apps or before it is read.",
    )


class ProfileSummaryOut(BaseModel):
    signature: str
    runs: int
    median_total_s: float | None
    mean_input_bytes: float | None
    partitions: dict[str, int] = Field(
        description="Runs per partition: virtual (the shared default partition) and native (a "
        "node-label partition of dedicated nodes)."
    )
    slowdown: float | None = Field(
        description="Median run time on the shared partition over that on the dedicated one."
    )
    last_finished_ms: int | None
    error: dict[str, Any] = Field(
        description="Relative error of estimating each run from the runs before it: samples, "
        "mean and 90th percentile."
    )


class ProfileListOut(BaseModel):
    items: list[ProfileSummaryOut]


class RunOut(BaseModel):
    app_id: str
    partition: str
    finished_ms: int
    input_bytes: float
    cluster_size: float = Field(description="Cluster vcores when the run was recorded.")
    map_s: float
    reduce_s: float
    total_s: float
    tasks: int


class ProfileOut(ProfileSummaryOut):
    phases: dict[str, Any] = Field(
        description="PRISM's phase profile: per phase the mean duration, tasks, mean and peak "
        "vcores, vcores per task and the container-size advice."
    )
    recent_runs: list[RunOut]


class EstimateIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    signature: str = Field(min_length=1, max_length=2000)
    input_bytes: float = Field(gt=0, description="The job's input size in bytes.")
    cluster_size: float = Field(gt=0, description="Vcores the job would run on.")


class EstimateOut(BaseModel):
    signature: str
    rule: str | None = Field(description="HybridMR Algorithm 1's rule; null: no estimate.")
    map_s: float | None
    reduce_s: float | None
    total_s: float | None
    low_s: float | None = Field(description="total_s less the signature's p90 relative error.")
    high_s: float | None = Field(description="total_s plus the signature's p90 relative error.")
    error: dict[str, Any]
    reason: str
