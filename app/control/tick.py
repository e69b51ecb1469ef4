"""The pure parts of one controller tick (``docs/style.md``, "The tick": observe -> decide ->
plan -> act -> record): what a tick computed (``Work``), drift against the last push, settling a
push whose answer was never recorded, the decision's status, and the audit record's inputs and
outputs. ``app.services.controller`` does the I/O around them; ``app.db.control_rows`` turns them
into rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.control import floors as control_floors
from app.control import preemption
from app.control.config import ControlConfig
from app.control.drift import differences
from app.control.ledger import LedgerStep
from app.control.plan import Plan
from app.domain.live import LiveConfig, PushResult
from app.domain.model import queue_names
from app.domain.observation import Cursors, PolicyInputs
from app.domain.outcome import PolicyOutcome

KIND = "queue"


class PendingPush(Protocol):
    """A push written ahead of its PUT (a ``config_pushes`` row), as settling reads it."""

    @property
    def id(self) -> int: ...

    @property
    def version_before(self) -> int | None: ...

    @property
    def values(self) -> Mapping[str, Mapping[str, str]]: ...


@dataclass(frozen=True, slots=True)
class Context:
    """What a tick knows before asking the RM: cluster, configuration, freshness of the data."""

    cluster_id: int
    cfg: ControlConfig
    source: str
    last_good_poll_ms: int | None


@dataclass(frozen=True, slots=True)
class Work:
    """Everything a tick computed; nothing of it is stored yet (``preview`` stops here)."""

    ctx: Context
    now_ms: int
    live: LiveConfig
    inputs: PolicyInputs
    outcome: PolicyOutcome
    plan: Plan
    ledger: LedgerStep | None
    ledger_before: Mapping[str, Any]
    state_before: Mapping[str, Any]
    drift: Mapping[str, Any]
    baseline: Mapping[str, Any] | None
    settle: tuple[int, str] | None = None
    pending_id: int | None = None
    floors: control_floors.Floors | None = None
    # The decision written ahead with the push (status ``pushing``), completed by ``_commit``.
    pending_decision_id: int | None = None
    # The interference guard's tick (``app.control.guard``): its audit and the state to store.
    guard: Mapping[str, Any] | None = None
    # Where this tick's counts of completions stopped, stored with it for the next tick.
    cursors: Cursors | None = None

    @property
    def drift_blocks(self) -> bool:
        """Drift is never overwritten silently: only with ``allow_drift_overwrite``."""
        return bool(self.drift) and not self.ctx.cfg.allow_drift_overwrite


@dataclass(frozen=True, slots=True)
class TickReport:
    """What one tick did (returned to tests and the CLI)."""

    status: str
    reason: str
    decision_id: int | None = None
    pushed: Mapping[str, Mapping[str, str]] | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


def drift(baseline: Mapping[str, Any] | None, live: LiveConfig) -> dict[str, Any]:
    if baseline is None:
        return {}
    if live.version is not None and live.version == baseline.get("version"):
        return {}  # nothing was written since our last push
    diff = differences(baseline["values"], live.values)
    if not diff:
        return {}
    return {
        "queues": diff,
        "baseline_version": baseline.get("version"),
        "live_version": live.version,
        "baseline_push_id": baseline.get("id"),
    }


PUSHING = ("pushing", "written before the PUT; completed when the RM answers")
# A recovered push's decision status, by what the RM's state shows.
RECOVERED = {"applied": "pushed", "not_applied": "not_applied", "unknown": "unknown"}


def settle_pending(pending: PendingPush, live: LiveConfig) -> tuple[int, str]:
    """What became of a push whose tick died before recording the RM's answer.

    Every accepted scheduler-configuration change moves the RM's configuration version, so an
    unmoved version proves the PUT never landed (``not_applied``). A moved version with the
    pushed values in place means it landed (``applied``; the baseline from now on). A moved
    version with other values, or no version to compare, cannot tell (``unknown``)."""
    before, now = pending.version_before, live.version
    if before is not None and now is not None and now == before:
        return pending.id, "not_applied"
    if not differences(pending.values, live.values):
        return pending.id, "applied"
    return pending.id, "unknown"


def recovery_reason(settled: str, live: LiveConfig) -> str:
    """The reason a recovered push's decision gives."""
    version = f"configuration version {live.version}" if live.version is not None else ""
    why = {
        "applied": f"the RM holds the pushed values ({version or 'values compared'})",
        "not_applied": f"the RM's {version} has not moved since the push: the PUT never landed",
        "unknown": "the RM holds other values and its configuration moved since the push: "
        "whether this PUT landed cannot be told",
    }[settled]
    return f"settled by a later tick (the RM's answer to the PUT was never recorded): {why}"


def pushes(work: Work) -> bool:
    """Whether this tick sends its plan to the RM."""
    cfg = work.ctx.cfg
    return cfg.mode == "enforce" and work.plan.push and not work.drift_blocks


PUSH_STATUS = {
    "applied": "pushed",
    "unverified": "pushed_unverified",
    "rejected": "rejected",
    "unavailable": "failed",
    "reverted": "reverted",
    "revert_failed": "revert_failed",
    "superseded": "drift",
    # the configuration version moved between the tick's read and its PUT: nothing was sent
    "conflict": "drift",
}


def concurrent_write(result: PushResult) -> bool:
    """An applied push whose configuration version moved by more than its own one write: another
    write landed around it (the actuator's message says which window)."""
    before, after = result.version_before, result.version_after
    return result.applied and before is not None and after is not None and after != before + 1


def outcome_status(work: Work, result: PushResult | None) -> tuple[str, str]:
    """The decision's status and reason."""
    if result is not None:
        if concurrent_write(result):
            return "pushed_concurrent", result.message
        return PUSH_STATUS.get(result.status, result.status), result.message
    if not work.plan.push:
        return "no_change", work.plan.reason
    if work.drift_blocks:
        queues = ", ".join(sorted(work.drift["queues"]))
        return "drift", (
            f"configuration of {queues} was changed outside the sidecar; not overwritten "
            "(set allow_drift_overwrite, or PUT /policy with accept_drift)"
        )
    return "advised", f"advise mode: would push ({work.plan.reason})"


def audit_inputs(work: Work) -> dict[str, Any]:
    """The inputs part of a decision: samples, live configuration, ledger, policy state."""
    ledger = work.ledger
    return {
        "policy_inputs": work.inputs.to_dict(),
        "live": work.live.to_dict(),
        "last_good_poll_ms": work.ctx.last_good_poll_ms,
        "config_source": work.ctx.source,
        "policy_state_before": dict(work.state_before),
        "ledger": {
            "before": dict(work.ledger_before),
            "after": ledger.state.to_dict() if ledger else None,
            "interval": [ledger.start_ms, ledger.end_ms] if ledger else None,
            "skipped_gaps_s": ledger.skipped_gaps_s if ledger else 0.0,
            "rows": [r.to_dict() for r in ledger.rows] if ledger else [],
        },
        "baseline": dict(work.baseline) if work.baseline is not None else None,
    }


def audit_outputs(work: Work, result: PushResult | None) -> dict[str, Any]:
    """The outputs part: the policy's numbers, the plan with reasons, drift, the push result."""
    return {
        "policy": work.outcome.to_dict(),
        "plan": work.plan.to_dict(),
        "guard": dict(work.guard) if work.guard is not None else None,
        "drift": dict(work.drift),
        "drift_overwritten": bool(work.drift) and result is not None,
        "push": result.to_dict() if result is not None else None,
        "floors": work.floors.to_dict() if work.floors is not None else None,
        "effect": effect(work),
    }


def floors(
    cfg: ControlConfig,
    live: LiveConfig,
    inputs: PolicyInputs,
    admission: Mapping[str, control_floors.Amount],
    admitted: Mapping[str, int] | None = None,
) -> control_floors.Floors:
    """Every managed queue's floor from the live cluster (``app.control.floors``).

    ``admitted``: containers the admitted deadline jobs hold per queue (full path or leaf name,
    as a job names its queue); each counts as one minimum allocation, the least YARN gives a
    container, and the larger of that and ``admission`` (given outright) is the queue's
    reservation."""
    settings = live.scheduler
    unit = control_floors.Amount(
        settings.min_allocation_vcores or control_floors.DEFAULT_MIN_ALLOCATION_VCORES,
        settings.min_allocation_mb or control_floors.DEFAULT_MIN_ALLOCATION_MB,
    )
    source = "RM configuration" if settings.min_allocation_mb else "YARN defaults (RM unreadable)"
    scale = parent_fraction(cfg, live)
    parent = control_floors.Amount(inputs.total.vcores * scale, inputs.total.memory_mb * scale)
    queues = sorted(live.values)
    held_by: dict[str, int] = {}
    for name, containers in (admitted or {}).items():
        queue = managed_queue(name, queues)
        if queue is not None:  # else not a queue this controller moves
            held_by[queue] = held_by.get(queue, 0) + containers
    reserved = dict(admission)
    for queue, containers in held_by.items():
        held = unit.times(containers)
        given = reserved.get(queue)
        if given is not None:
            held = control_floors.Amount(
                max(held.vcores, given.vcores), max(held.memory_mb, given.memory_mb)
            )
        reserved[queue] = held
    return control_floors.compute(queues, cfg.floors, unit, source, parent, cfg.bounds, reserved)


def managed_queue(name: str, queues: Sequence[str]) -> str | None:
    """The managed queue ``name`` means: its full path, or a leaf name that only one of them
    ends with (YARN resolves a submission's leaf name so when it is unique)."""
    if name in queues:
        return name
    leaves = [q for q in queues if name in queue_names(q)]
    return leaves[0] if len(leaves) == 1 else None


def parent_fraction(cfg: ControlConfig, live: LiveConfig) -> float:
    """The managed parent's fraction of the cluster: its children's absolute capacities."""
    if cfg.managed_parent == "root" or not live.queues:
        return 1.0
    return min(1.0, sum(q.absolute_capacity for q in live.queues) / 100)


def effect(work: Work) -> dict[str, Any] | None:
    """How much of each changed guarantee takes effect now, how much waits for containers to
    finish (or for preemption), from the live cluster (``app.control.preemption``)."""
    if not work.plan.push:
        return None
    parent_vcores = work.inputs.total.vcores * parent_fraction(work.ctx.cfg, work.live)
    changed = work.plan.changes()
    changes = {}
    for q, line in work.plan.lines.items():
        pair = preemption.guarantees(line.numbers, parent_vcores)
        if q in changed and pair is not None:
            changes[q] = pair
    used = {q.path: float(q.used.vcores) for q in work.live.queues}
    settings = work.live.scheduler
    preempts = settings.preempts
    return preemption.split(changes, used, parent_vcores, preempts, settings.to_dict())
