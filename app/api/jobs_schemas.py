"""Request and response schemas of ``/jobs`` and ``/estimator`` (never ORM rows).

``deadline`` is either seconds from submission (a JSON number) or an absolute ISO 8601 time (a
string; without an offset it is UTC). Parallelism is ``requested_tasks`` or ``input_bytes`` with
``block_size`` (default 128 MiB), exactly one of the two (the route checks it, naming the field).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.domain.tags import (
    APP_NAME_PATTERN,
    DEFAULT_BLOCK_SIZE,
    MAX_USER_TAGS,
    TAG_PATTERN,
    is_reserved,
)

MAX_DEADLINE_S = 366 * 24 * 3600.0
MIN_DEADLINE_S = 1.0
MAX_TASKS = 10_000_000
MAX_BYTES = 2**63 - 1


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ResourceIn(_In):
    memory_mb: int = Field(512, ge=1, le=1_048_576, description="AM container memory (MB).")
    vcores: int = Field(1, ge=1, le=1024, description="AM container vcores.")


class LocalResourceIn(_In):
    name: str = Field(min_length=1, max_length=500, description="File name in the container.")
    resource: str = Field(min_length=1, max_length=4000, description="URL, e.g. hdfs://nn/x.jar")
    type: Literal["FILE", "ARCHIVE", "PATTERN"] = "FILE"
    visibility: Literal["PUBLIC", "PRIVATE", "APPLICATION"] = "APPLICATION"
    size: int = Field(ge=0, description="Bytes; must match the file exactly.")
    timestamp: int = Field(ge=0, description="Modification time (ms); must match exactly.")


class ApplicationRun(_In):
    """An ApplicationMaster the user brings (``docs/yarn.md`` section 4.2)."""

    kind: Literal["application"]
    command: str = Field(min_length=1, max_length=20_000, description="AM command line.")
    resource: ResourceIn = Field(default_factory=lambda: ResourceIn(memory_mb=512, vcores=1))
    environment: dict[str, str] = Field(default_factory=dict, max_length=200)
    local_resources: list[LocalResourceIn] = Field(default_factory=list, max_length=100)
    application_type: str = Field("YARN", min_length=1, max_length=100)
    max_app_attempts: int = Field(1, ge=1, le=10)
    priority: int = Field(0, ge=0, le=1000)
    task_containers: bool = Field(
        False,
        description="Each task runs in a container of its own that ends with it (MapReduce, Tez "
        "without container reuse; not Spark executors): the sidecar may then time the first "
        "wave from the RM's container list and end the job before its deadline once its waves "
        "cannot finish in time.",
    )


class SleepRun(_In):
    """Built-in demo: a distributed-shell app whose ``requested_tasks`` tasks sleep ``seconds``
    each, run in waves on the granted containers (one per granted vcore)."""

    kind: Literal["sleep"]
    seconds: float = Field(gt=0, le=86_400, description="Each task's sleep.")
    container_memory_mb: int = Field(256, ge=64, le=65_536)


class TemplateRun(_In):
    """One of the operator's job templates (``GET /templates``) with its parameters."""

    kind: Literal["template"]
    template: str = Field(min_length=1, max_length=63)
    parameters: dict[str, int | float | str] = Field(default_factory=dict, max_length=50)
    memory_mb: int | None = Field(None, ge=1, le=1_048_576, description="AM memory (MB).")
    vcores: int | None = Field(None, ge=1, le=1024, description="AM vcores.")

    @field_validator("parameters", mode="before")
    @classmethod
    def _no_booleans(cls, value: Any) -> Any:
        # Lax validation would read ``true`` as the integer 1 before the template could refuse it.
        if isinstance(value, dict):
            for name, given in value.items():
                if isinstance(given, bool):
                    raise ValueError(f"{name}: must be a number or a string, not {given!r}")
        return value


RunIn = Annotated[ApplicationRun | SleepRun | TemplateRun, Field(discriminator="kind")]


class TemplateParamOut(BaseModel):
    type: str
    description: str
    default: int | float | str | None
    min: float | None = None
    max: float | None = None
    choices: list[str] | None = None
    pattern: str | None = None


class TemplateOut(BaseModel):
    name: str
    description: str
    application_type: str
    parameters: dict[str, TemplateParamOut]
    queues: list[str]
    max_memory_mb: int
    max_vcores: int


class TemplateList(BaseModel):
    items: list[TemplateOut]


class JobIn(_In):
    """``POST /jobs``."""

    name: str = Field(min_length=1, max_length=200)
    queue: str | None = Field(
        None, min_length=1, max_length=500, description="Default: YARN_SIDECAR_DEADLINE_QUEUE."
    )
    deadline: float | dt.datetime = Field(
        description="Seconds from submission (number) or an absolute ISO 8601 time (string)."
    )
    requested_tasks: int | None = Field(None, ge=1, le=MAX_TASKS)
    input_bytes: int | None = Field(None, ge=1, le=MAX_BYTES)
    block_size: int = Field(DEFAULT_BLOCK_SIZE, ge=1, le=MAX_BYTES)
    run: RunIn
    tags: list[str] = Field(default_factory=list, max_length=MAX_USER_TAGS)
    idempotency_key: str | None = Field(None, min_length=1, max_length=200)

    @field_validator("deadline", mode="before")
    @classmethod
    def _deadline(cls, value: Any) -> Any:
        # A string is a time, a number is a duration; "60" is not silently either.
        if isinstance(value, bool):
            raise ValueError("must be a number of seconds or an ISO 8601 time")
        if isinstance(value, int | float):
            # Below a second the job would be due before admission could run.
            if not MIN_DEADLINE_S <= value <= MAX_DEADLINE_S:
                raise ValueError(f"seconds must be >= {MIN_DEADLINE_S:g} and <= {MAX_DEADLINE_S:g}")
            return float(value)
        if isinstance(value, str):
            try:
                parsed = dt.datetime.fromisoformat(value)
            except ValueError:
                raise ValueError(f"{value!r} is not an ISO 8601 time") from None
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
        raise ValueError("must be a number of seconds or an ISO 8601 time")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        # YARN's launch script carries the name unescaped (``app.domain.tags``)
        if not APP_NAME_PATTERN.fullmatch(value):
            raise ValueError(
                "a letter or digit, then letters, digits, spaces and . : / = @ + - _ only"
            )
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        for tag in value:
            if not TAG_PATTERN.fullmatch(tag):
                raise ValueError(
                    f"{tag!r}: 1 to 100 of the ASCII letters, digits and . : / = @ + - _"
                )
            if is_reserved(tag):
                raise ValueError(
                    f"{tag!r}: sidecar-job:, deadline:, tasks: and timeline_flow_ tags are "
                    "set by the sidecar or by YARN"
                )
        return value

    def fingerprint(self) -> str:
        """Hash of the request without its idempotency key (same key + other body -> 409)."""
        body = self.model_dump(mode="json", exclude={"idempotency_key"})
        if body["run"].get("task_containers") is False:
            # added later: a request without it hashes as it did before
            del body["run"]["task_containers"]
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class JobDecisionOut(BaseModel):
    at: dt.datetime
    action: str = Field(
        description="admit | queue | drop | kill (policy); reserve | submit | adopt | fail | "
        "cancel | finish | killed | cancelled (lifecycle)."
    )
    policy: str | None
    cpus: int
    req_cpus: int | None
    fraction: float | None
    ttd_s: float | None = Field(description="Time to deadline when decided (s).")
    priority: float | None = Field(description="reqCpus / TTD (lower is admitted first).")
    reason: str
    numbers: dict[str, Any]
    round_id: int | None = Field(description="The admission round's row in the decision audit.")
    principal: str | None = Field(None, description="Who caused it; null for the sidecar itself.")


class JobOut(BaseModel):
    id: str
    name: str
    queue: str
    state: str
    requested_tasks: int
    input_bytes: int | None
    block_size: int | None
    deadline_s: float = Field(description="Deadline in seconds from submission.")
    deadline_at: dt.datetime
    submitted_at: dt.datetime
    run: dict[str, Any]
    tags: list[str]
    idempotency_key: str | None
    granted_cpus: int | None
    admitted_at: dt.datetime | None
    app_id: str | None
    app_state: str | None
    final_status: str | None
    yarn_submitted_at: dt.datetime | None
    lifetime_expiry_at: dt.datetime | None
    finished_at: dt.datetime | None
    elapsed_ms: int | None
    vcore_seconds: int | None
    met_deadline: bool | None
    task_floor_s: float | None = Field(
        None,
        description="How long its first wave's tasks had run without one ending, timed from the "
        "RM's container list when its run sets task_containers (Promise ends the job once its "
        "waves at that pace cannot finish by the deadline); null until timed.",
    )
    progress: float | None = Field(
        None,
        description="Its app's latest progress (0 to 1), read from the RM when its run sets "
        "task_containers (Promise ends the job once the rate since its first reading above 0 "
        "ends it after the deadline); null until read.",
    )
    reason: str
    updated_at: dt.datetime
    owner: str | None = Field(None, description="The user it runs as and who may cancel it.")


class JobAccepted(JobOut):
    decision: JobDecisionOut | None = Field(description="The decision the submission produced.")
    eta: dict[str, Any] | None = Field(
        None,
        description="Promise policy only: predicted start_s and finish_s (bound) and "
        "finish_point_s (central), what a queued job waits_for, its latest_start_s, crowd_out "
        "(for a job held back for arriving jobs: how many its hold would crowd out), and for a "
        "drop the earliest_finish_s it could have had (epoch seconds).",
    )


class JobDetail(JobOut):
    decisions: list[JobDecisionOut]
    eta: dict[str, Any] | None = Field(
        None,
        description="Promise policy only: predicted start_s and finish_s (bound) and "
        "finish_point_s (central), what a queued job waits_for, its latest_start_s, crowd_out "
        "(for a job held back for arriving jobs: how many its hold would crowd out), and for a "
        "drop the earliest_finish_s it could have had (epoch seconds).",
    )


class JobPage(BaseModel):
    items: list[JobOut]
    next_cursor: str | None = Field(
        description="Pass as ?cursor= for the next page; null at the end."
    )


class EstimatorOut(BaseModel):
    policy: str
    smoothing: str
    alpha: float
    drop_threshold: int
    observations: int = Field(description="Completed jobs learned from (TRACK_JOB calls).")
    skipped: int = Field(description="Finished apps considered but not learned from.")
    min_cpu_frac: float | None = Field(description="MinCPUFrac: min of minReqRate.")
    max_cpu_frac: float | None = Field(description="MaxCPUFrac (PYTHIA's CPUFrac).")
    last_cpu_frac: float | None = Field(description="LastCPUFrac of the last completed job.")
    last_success: bool
    correction: float = Field(description="Smoothed mean of the fraction errors (Algorithm 5).")
    fraction: float | None = Field(
        description="Allocation fraction a new job gets now; null while bootstrapping (< 2)."
    )
    capacity_vcores: int | None
    version: int
    updated_at: dt.datetime | None
    signatures: dict[str, dict[str, Any]] | None = Field(
        None,
        description="Promise policy only: per signature (and fallback key) the runs, samples "
        "(killed: of them, killed runs kept as lower bounds of their work), work quantiles (null "
        "where the killed runs leave one unknown) and prediction error so far.",
    )
    prediction_error: dict[str, Any] | None = Field(
        None,
        description="Promise policy only: errors over all signatures, and how many finished "
        "runs were checked against the work bound they would have had and the share above it "
        "(bounds_checked, above_bound: about 0.05 while the 0.95 bounds hold as they should).",
    )
    admitted_floor_vcores: int | None = Field(
        None,
        description="Promise policy only: vcores the deadline queue must keep (admitted grants "
        "plus their ApplicationMaster containers).",
    )
    startup: dict[str, Any] | None = Field(
        None,
        description="Promise policy only: the start-up prior (prior_s) planned at least while "
        "fewer of the sidecar's own start-ups were seen than the quantile needs (seen, needed, "
        "prior_holds).",
    )
    loading: bool | None = Field(
        None,
        description="Promise policy only: true while the estimator is read from the whole "
        "history (after a restart, or a capacity change that relearns it); signatures and "
        "errors are then not shown, and a submission answers queued until the round after it.",
    )


class ObservationOut(BaseModel):
    app_id: str
    job_id: str | None
    source: str = Field(description="job (submitted by the sidecar) or tagged (deadline: tag).")
    observed_at: dt.datetime
    learned: bool
    censored: bool = Field(
        description="A killed job's run, not learned by TRACK_JOB but kept by the Promise "
        "estimator as a lower bound of its work (comp_time is what it had used)."
    )
    tasks: int | None
    deadline_s: float | None
    comp_time: float | None
    cpus: int | None
    success: bool | None
    estimator_version: int | None
    reason: str


class ObservationList(BaseModel):
    items: list[ObservationOut]
