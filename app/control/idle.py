"""The idle-cluster rule for every queue policy: with no demand anywhere, capacities go back
towards the configured baseline, within the step limit (``docs/policies.md`` gives no rule for an
idle cluster; without one, a cluster stays skewed towards whoever was busy last).

Decisions where the docs are silent:

* Idle: over the whole interval no managed queue had a running or pending application, a
  pending container or used vcores (every interval average is 0). One busy sample is demand.
* The baseline is, in this order: the operator's ``baseline`` (percent per queue); the
  configuration an operator last accepted as the drift baseline (``PUT /policy`` with
  ``accept_drift``); the values the RM held before the sidecar's first push. With none of these
  (nothing was ever pushed) the live configuration already is the baseline: nothing changes.
* The return is an ordinary plan: floors, bounds, minimum change and step limit all apply, so
  the way back is as gradual as the way out. The policy still runs (its state, e.g. Fawkes'
  discrimination, keeps advancing); only its shares are replaced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from app.control.drift import normalise
from app.domain.observation import PolicyInputs
from app.domain.outcome import PolicyOutcome


def no_demand(inputs: PolicyInputs, queues: Sequence[str]) -> bool:
    """True when no managed queue had any demand or usage over the interval."""
    for q in queues:
        s = inputs.queues.get(q)
        if s is None:
            continue
        busy = (s.used_vcores, s.pending_vcores, s.pending_containers)
        if any(v > 0 for v in (*busy, s.pending_apps, s.running_apps)):
            return False
    return True


def percent_values(values: Mapping[str, Mapping[str, str]]) -> dict[str, float] | None:
    """``capacity`` strings as percentages; None when any is not a plain percentage."""
    out: dict[str, float] = {}
    for q, v in values.items():
        norm = normalise(v.get("capacity"))
        if not isinstance(norm, int):
            return None
        out[q] = norm / 100
    return out or None


def baseline(
    configured: Mapping[str, float],
    accepted: Mapping[str, Mapping[str, str]] | None,
    before_first_push: Mapping[str, Mapping[str, str]] | None,
    queues: Sequence[str],
) -> tuple[dict[str, float] | None, str]:
    """The baseline percentages of ``queues`` and where they come from (see module)."""
    if configured:
        return {q: float(configured.get(q, 0.0)) for q in queues}, "operator baseline"
    for values, source in (
        (accepted, "configuration accepted by the operator"),
        (before_first_push, "configuration before the sidecar's first push"),
    ):
        found = percent_values(values) if values else None
        if found is not None and set(queues) <= set(found):
            return {q: found[q] for q in queues}, source
    return None, "no baseline: nothing was pushed yet"


def toward_baseline(
    outcome: PolicyOutcome,
    percents: Mapping[str, float],
    source: str,
    cluster: Mapping[str, float],
) -> PolicyOutcome:
    """The policy's outcome with its shares replaced by the baseline (absolute amounts for a
    policy that plans them), the policy's own numbers kept in the details."""
    details: dict[str, Any] = {
        **dict(outcome.details),
        "idle_rule": {"baseline": dict(percents), "source": source, "policy_note": outcome.note},
    }
    note = f"idle cluster (no demand in any queue): back towards the {source}"
    if outcome.amounts is not None:
        amounts = {
            q: {r: p / 100 * float(cluster.get(r, 0.0)) for r in ("vcores", "memory")}
            for q, p in percents.items()
        }
        return replace(outcome, amounts=amounts, details=details, note=note)
    shares = {q: p / 100 for q, p in percents.items()}
    return replace(
        outcome, shares=shares, absolute=None, details=details, min_change_applies=True, note=note
    )
