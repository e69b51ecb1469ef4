"""Fawkes' queue adapter: the shared observation view -> one ``core.step`` -> shares (seed 000,
sections 4.2 and 4.3; ``docs/style.md``, "The tick": decide).

Decisions where the docs are silent:

* ``waiting_jobs`` = pending apps, ``waiting_tasks`` = pending containers, ``running_jobs`` =
  running apps, ``completed_jobs`` = apps that finished in the interval (interval means).
* ``DD``, ``TT`` and ``JS`` read the view's waiting input bytes, completed tasks and slowdowns.
  The RM's REST API reports none of them, so the live view carries 0 there and Fawkes falls back
  to equal weights inside ``DD``/``JS``; the simulator's view carries the true values.
* The minimum shares ``m_i`` are the operator's minimum bounds; Fawkes' ``tau`` is the
  hysteresis, so the plan's minimum change does not apply on top.
* ``None`` (static minimum shares, section 4.3: queues "run permanently on their minimum
  shares") asks the plan for maximum-capacity = capacity, so its queues do not borrow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.domain.observation import PolicyInputs, QueueInputs
from app.domain.outcome import PolicyOutcome
from app.policies.base import QueueContext
from app.policies.fawkes import core


def sample(q: QueueInputs) -> core.QueueSample:
    """The Fawkes sample of one queue's interval averages."""
    return core.QueueSample(
        waiting_jobs=q.pending_apps,
        waiting_tasks=q.pending_containers,
        waiting_input_bytes=q.waiting_input_bytes,
        running_jobs=q.running_apps,
        used_fraction=min(1.0, q.used_fraction),
        vcore_utilization=q.vcore_utilization,
        memory_utilization=q.memory_utilization,
        completed_jobs=float(q.completed_apps),
        completed_tasks=q.completed_tasks,
        slowdowns=q.slowdowns,
    )


# Fawkes weightings that read what the RM's REST API does not report (seed 000, section 4.2).
_NEEDS = {
    "DD": {"waiting_input_bytes": "the input bytes of waiting jobs"},
    "TT": {"completed_tasks": "the tasks completed in each interval"},
    "JS": {"slowdowns": "the slowdowns of running jobs against their profiles"},
}


def needs(params: Mapping[str, Any]) -> Mapping[str, str]:
    """The view fields the configured weighting decides on beyond the RM's numbers."""
    return _NEEDS.get(str(params.get("weighting", "")), {})


def decide(
    view: PolicyInputs,
    queues: tuple[str, ...],
    context: QueueContext,
    state: Mapping[str, Any],
) -> PolicyOutcome:
    """One ``core.step`` at ``t = now`` (seconds) from the persisted ``state``."""
    params = core.FawkesParams.from_values(context.params, min_shares=context.min_shares)
    tick = core.FawkesTick(
        t=view.now_ms / 1000, queues={q: sample(view.queues[q]) for q in queues if q in view.queues}
    )
    decision, new_state = core.step(core.FawkesState.from_dict(state), tick, params)
    shares = {q: decision.shares.get(q, 0.0) for q in queues}
    any_share = any(v > 0 for v in shares.values())
    return PolicyOutcome(
        shares=shares if any_share else None,
        state=new_state.to_dict(),
        details=decision.to_dict(),
        min_change_applies=False,
        no_borrowing=params.weighting == "None",
        fair_weights=dict(decision.weights),
        note=decision.reason if any_share else f"{decision.reason}: no queue has a share",
    )
