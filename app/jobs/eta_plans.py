"""The latest plan of the queued jobs' ETAs, shared by the readers of one process.

A queued job's ETA under Promise is what the planner says now, and the planner ranks every
waiting and running job: over 10,000 waiting jobs that is about 0.4 s of CPU, once for each
``GET /jobs/{id}`` if each read planned for itself, so a few clients polling their jobs would
take the server's CPU. Admission re-plans at every submission and every admission interval
anyway; a reader takes the ETA from the latest plan, the round's or another reader's, while it
is younger than one admission interval and the job's latest start has not passed (a job past it
is about to be dropped or tried, which a new plan says). One reader at a time makes a new plan;
the others meanwhile answer from the one before, so an expiry does not set every waiting
request thread planning at once. No reader waits for a plan being made.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class QueuedPlan:
    """What one plan said of each job it left queued, under which policy parameters, when."""

    made_ms: int
    policy: Mapping[str, Any]
    etas: Mapping[str, dict[str, Any]]


class EtaPlans:
    """The latest ``QueuedPlan`` and the rule for reusing it (module docstring)."""

    def __init__(self, max_age_ms: int) -> None:
        self.max_age_ms = max_age_ms
        self._plan: QueuedPlan | None = None
        self._planning = threading.Lock()
        # Held only to compare two times and swap one reference, never across any I/O.
        self._keeping = threading.Lock()

    def remember(self, plan: QueuedPlan) -> None:
        """Keep ``plan`` unless a later one is kept already."""
        with self._keeping:
            kept = self._plan
            if kept is None or plan.made_ms >= kept.made_ms:
                self._plan = plan

    def eta(
        self,
        job_id: str,
        policy: Mapping[str, Any],
        now_ms: int,
        plan: Callable[[], QueuedPlan | None],
    ) -> dict[str, Any] | None:
        """``job_id``'s ETA from a plan still good at ``now_ms``, making one with ``plan`` when
        there is none (``None``: not a job the plan leaves queued)."""
        kept = self._plan
        if kept is not None and _usable(kept, job_id, policy, now_ms, self.max_age_ms):
            return kept.etas[job_id]
        if not self._planning.acquire(blocking=False):
            # Another reader is planning: the plan before, if it has the job, however old.
            if kept is not None and kept.policy == policy and job_id in kept.etas:
                return kept.etas[job_id]
            made = plan()
        else:
            try:
                made = plan()
            finally:
                self._planning.release()
        if made is None:
            return None
        self.remember(made)
        return made.etas.get(job_id)


def _usable(
    plan: QueuedPlan, job_id: str, policy: Mapping[str, Any], now_ms: int, max_age_ms: int
) -> bool:
    if plan.policy != policy or now_ms - plan.made_ms > max_age_ms:
        return False
    eta = plan.etas.get(job_id)
    if eta is None:
        return False
    latest = eta.get("latest_start_s")
    return latest is None or latest * 1000 >= now_ms
