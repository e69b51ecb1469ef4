"""What a pushed capacity change does now, and what waits (the CapacityScheduler's semantics,
``docs/yarn.md``; issue of the live cluster's preemption).

A queue's capacity is a guarantee, not an allocation: without preemption, a queue that gets a
larger guarantee only gains containers as other queues' containers finish. With the scheduling
monitor running ``ProportionalCapacityPreemptionPolicy``, the RM reclaims the difference itself,
after ``monitoring_interval`` plus ``max_wait_before_kill`` (defaults 3 s and 15 s).

The split is in vcores (the resource the mini cluster and most deployments are short of; DRF's
dominant resource there), per changed queue, from the queues' used vcores at the tick:

* a queue whose guarantee shrinks by ``d`` frees ``d`` now, except what it runs above its new
  guarantee: ``min(d, max(0, used - new))`` waits;
* a queue whose guarantee grows by ``d`` already holds what it uses above its old guarantee, and
  can take idle vcores now (shared among the growing queues in proportion to their growth); the
  rest waits for containers of the shrinking queues to finish (or to be preempted).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_MONITORING_INTERVAL_MS = 3000
DEFAULT_MAX_WAIT_BEFORE_KILL_MS = 15000


def guarantees(numbers: Mapping[str, Any], parent_vcores: float) -> tuple[float, float] | None:
    """(live, planned) guaranteed vcores of one plan line; None when the line has no numbers."""
    if "planned_h" in numbers and "live_h" in numbers:
        scale = parent_vcores / 10000
        return float(numbers["live_h"]) * scale, float(numbers["planned_h"]) * scale
    live, planned = numbers.get("live"), numbers.get("planned")
    if isinstance(live, Mapping) and isinstance(planned, Mapping):
        return float(live.get("vcores", 0.0)), float(planned.get("vcores", 0.0))
    return None


def split(
    changes: Mapping[str, tuple[float, float]],
    used: Mapping[str, float],
    parent_vcores: float,
    preempts: bool,
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``changes``: queue -> (live, planned) guaranteed vcores; ``used``: vcores in use now."""
    settings = settings or {}
    free = max(0.0, parent_vcores - sum(used.values()))
    growth = {q: b - a for q, (a, b) in changes.items() if b > a}
    held = {q: min(d, max(0.0, used.get(q, 0.0) - changes[q][0])) for q, d in growth.items()}
    rest = {q: growth[q] - held[q] for q in growth}
    wanted = sum(rest.values())
    queues: dict[str, dict[str, float]] = {}
    for q, (old, new) in sorted(changes.items()):
        delta = new - old
        if delta > 0:
            idle = free * rest[q] / wanted if wanted > 0 else 0.0
            now = held[q] + min(rest[q], idle)
        else:
            now = -delta - min(-delta, max(0.0, used.get(q, 0.0) - new))
        pending = abs(delta) - now
        queues[q] = {
            "live_vcores": old,
            "planned_vcores": new,
            "change_vcores": delta,
            "used_vcores": used.get(q, 0.0),
            "effective_now_vcores": now,
            "pending_vcores": pending,
        }
    interval = settings.get("monitoring_interval_ms") or DEFAULT_MONITORING_INTERVAL_MS
    wait = settings.get("max_wait_before_kill_ms") or DEFAULT_MAX_WAIT_BEFORE_KILL_MS
    gains = [v for v in queues.values() if v["change_vcores"] > 0]
    return {
        "unit": "vcores",
        "preemption": preempts,
        "pending_until": (
            f"preemption (about {(interval + wait) / 1000:g} s)"
            if preempts
            else "running containers of the shrinking queues finish"
        ),
        "effective_now_vcores": sum(v["effective_now_vcores"] for v in gains),
        "pending_vcores": sum(v["pending_vcores"] for v in gains),
        "free_vcores": free,
        "queues": queues,
    }
