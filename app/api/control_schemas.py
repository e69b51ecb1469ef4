"""Request and response schemas of the control-loop endpoints: ``/decisions``,
``/policy``, ``/ledger``. Never ORM rows."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class DecisionSummary(BaseModel):
    id: int
    created_at: dt.datetime | None
    kind: str = Field(description="queue (a controller tick), policy (an operator change), ...")
    policy: str
    mode: str
    status: str = Field(
        description="queue ticks: pushed, advised, no_change, drift, rejected, failed, reverted, "
        "stale, static, rm_error, policy_error; policy changes: changed."
    )
    reason: str
    pushed: dict[str, Any] | None = Field(description="What was sent to the RM, per queue.")


class DecisionDetail(DecisionSummary):
    principal: str | None = Field(
        None, description="Who caused it (API caller); null for the sidecar's own loops."
    )
    params: dict[str, Any] = Field(description="The configuration the decision ran with.")
    inputs: dict[str, Any] = Field(
        description="Per-queue interval averages, cluster size, the live configuration and its "
        "version, the ledger before and after, the policy state before."
    )
    outputs: dict[str, Any] = Field(
        description="The policy's numbers (weights, D_i, factor, alloc, shares), the plan with "
        "target, bounded and planned capacity and a reason per queue, drift, the push result."
    )
    rm_response: str | None


class DecisionPage(BaseModel):
    items: list[DecisionSummary]
    next_cursor: str | None = Field(
        description="Pass as ?cursor= for the next page; null at the end."
    )


class QueueBoundsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min: float = Field(0.0, description="Minimum capacity, percent of the parent.")
    max: float = Field(100.0, description="Maximum capacity, percent of the parent.")


# More queues than any CapacityScheduler parent holds; keeps one decision row small.
MAX_KEYS = 1000


class PolicyIn(BaseModel):
    """Fields to change; omitted fields keep their value. Validated by the policy registry."""

    model_config = ConfigDict(extra="forbid")

    policy: str | None = Field(None, description="static, fawkes:<weighting>, ltrf, mlrf or rrf.")
    params: dict[str, Any] | None = Field(
        None, max_length=MAX_KEYS, description="Policy parameters (registry)."
    )
    mode: str | None = Field(None, description="observe, advise or enforce.")
    bounds: dict[str, QueueBoundsIn] | None = Field(
        None, max_length=MAX_KEYS, description="Per queue path."
    )
    weights: dict[str, float] | None = Field(
        None, max_length=MAX_KEYS, description="Queue weights (default 1)."
    )
    max_step_pp: float | None = Field(None, description="Largest change per push, points.")
    min_change_pp: float | None = Field(None, description="Smallest change worth pushing.")
    allow_drift_overwrite: bool | None = None
    floors: dict[str, int] | None = Field(
        None,
        max_length=MAX_KEYS,
        description="Minimum share per queue path ('*': the others), in containers of the "
        "scheduler's minimum allocation; default 2 (one ApplicationMaster and one container).",
    )
    baseline: dict[str, float] | None = Field(
        None,
        max_length=MAX_KEYS,
        description="Capacities (percent, summing to 100) an idle cluster returns to.",
    )
    accept_drift: bool = Field(
        False, description="Make the RM's live configuration the new baseline for drift checks."
    )

    def changes(self) -> dict[str, Any]:
        """The fields given, as ``overlay`` changes."""
        out = self.model_dump(exclude_none=True, exclude={"accept_drift"})
        if self.bounds is not None:
            out["bounds"] = {q: b.model_dump() for q, b in self.bounds.items()}
        return out


class PolicyOut(BaseModel):
    policy: str
    params: dict[str, Any]
    mode: str
    bounds: dict[str, dict[str, float]]
    weights: dict[str, float]
    max_step_pp: float
    min_change_pp: float
    allow_drift_overwrite: bool
    managed_parent: str
    interval_s: float
    floors: dict[str, int] = Field(default_factory=dict)
    baseline: dict[str, float] = Field(default_factory=dict)
    source: str = Field(description="settings, or operator after a PUT /policy.")


class PreviewOut(BaseModel):
    status: str = Field(description="What a tick would record now (would_push in enforce).")
    reason: str
    config: dict[str, Any]
    inputs: dict[str, Any] | None = None
    outputs: dict[str, Any] | None = None
    changes: dict[str, Any] = Field(default_factory=dict, description="What would be sent.")


class LedgerPoint(BaseModel):
    start: dt.datetime | None
    end: dt.datetime | None
    weight: float
    entitlement: float = Field(description="vcore-seconds the queue was entitled to.")
    usage: float = Field(description="vcore-seconds it used (measured).")
    counted: float = Field(description="vcore-seconds counted (discounted beyond entitlement).")
    debt: float = Field(
        description="Cumulative lent minus borrowed (with lending=entitlement: entitlement minus "
        "usage); > 0: it has lent."
    )
    total_usage: float
    total_counted: float
    lent: float = Field(0.0, description="vcore-seconds another queue used of its entitlement.")
    borrowed: float = Field(0.0, description="vcore-seconds it used beyond its entitlement.")
    lent_to: dict[str, float] = Field(
        default_factory=dict, description="What it lent in this interval, per borrowing queue."
    )


class LedgerQueue(BaseModel):
    queue: str
    entitlement: float = Field(description="Sum over the listed intervals.")
    usage: float
    debt: float = Field(description="Cumulative, at the last listed interval.")
    points: list[LedgerPoint]


class LedgerOut(BaseModel):
    unit: str = "vcore-seconds"
    queues: list[LedgerQueue]
    truncated: bool = Field(
        False,
        description="True when older intervals were left out to stay within limit (the newest "
        "are listed); a higher limit or one queue lists more.",
    )
