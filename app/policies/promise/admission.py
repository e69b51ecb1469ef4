"""Promise behind the admission seam (``app/policies/promise``).

The estimator is the per-signature ``Estimator``, which the live sidecar rebuilds from every
learned observation rather than storing; ``admit`` is the planner (``core.admit``), ``learn``
adds one finished run. Running jobs book their grants plus one ApplicationMaster container
each (``am_containers``), so free = capacity - ``booked``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.policies.base import AdmissionPolicy
from app.policies.promise import core
from app.policies.promise.estimator import Estimator


class PromiseAdmission:
    """Promise with validated parameters."""

    name = "promise"
    estimator_source = "history"
    # Its estimates change with every learned run and its crowd-out test with the arrival
    # rate: a waiting job may start with no vcores freed.
    monotone = False

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.params: Mapping[str, Any] = dict(values)
        self.planner = core.promise_params(values)

    def booked(self, running: Sequence[Any]) -> int:
        """Grants plus AM containers of the running jobs."""
        return core.booked_floor(running, self.planner)

    def admit(
        self,
        waiting: Sequence[Any],
        running: Sequence[Any],
        free: int,
        capacity: int,
        now: float,
        estimator: Any,
        load: core.Load | None = None,
    ) -> list[core.Decision]:
        """The planner over ``core.WaitingJob`` / ``core.RunningJob`` with an ``Estimator``;
        ``load`` (recent arrivals, ``core.LoadMeter``) where the caller measures it."""
        return core.admit(waiting, running, free, capacity, now, estimator, self.planner, load)

    def learn(self, estimator: Any, outcome: Any, capacity: int) -> Estimator:
        """The estimator after one finished run (an ``estimator.Outcome``)."""
        est: Estimator = estimator
        return est.learn(outcome)

    def waiting_filter(self, estimator: Any, free: int) -> None:
        """None: not monotone, every round ranks every waiting job."""
        return None


def make(values: Mapping[str, Any]) -> AdmissionPolicy:
    """The ``PolicySpec.admission`` hook: validated parameters -> the policy."""
    return PromiseAdmission(core.make_params(values))
