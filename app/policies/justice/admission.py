"""Justice and PYTHIA behind the admission seam (seed 004, chapters 4 and 5).

The estimator is one ``EstimatorState`` (Min/Max/Last CPU fractions and the error list) that the
live sidecar persists as a row; ``admit`` is ADMISSION_CONTROL (Algorithm 6), ``learn`` is
TRACK_JOB (Algorithm 3). Free CPUs are capacity less the CPUs granted to the running jobs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from app.policies.base import AdmissionPolicy, AdmissionPolicyFactory, WaitingFilter
from app.policies.justice import core


class JusticeAdmission:
    """One variant (``justice`` or ``pythia``) with validated parameters."""

    estimator_source = "state"
    # reqCpus = ceil(fraction * deadline / TTD * min(tasks, capacity)) only grows as TTD shrinks,
    # and CREATE_OFFERS admits whole requests only: see ``AdmissionPolicy.monotone``.
    monotone = True

    def __init__(self, params: core.JusticeParams) -> None:
        self.justice = params
        self.name = params.variant
        self.params: Mapping[str, Any] = {k: v for k, v in asdict(params).items() if k != "variant"}

    def booked(self, running: Sequence[Any]) -> int:
        """CPUs granted to the running jobs."""
        return sum(int(j.cpus) for j in running)

    def admit(
        self,
        waiting: Sequence[Any],
        running: Sequence[Any],
        free: int,
        capacity: int,
        now: float,
        estimator: Any,
    ) -> list[core.Decision]:
        """Algorithm 6 over ``core.Job`` / ``core.RunningJob`` with an ``EstimatorState``."""
        return core.admit(estimator, waiting, running, free, capacity, now, self.justice)

    def learn(self, estimator: Any, outcome: Any, capacity: int) -> core.EstimatorState:
        """TRACK_JOB: the estimator after one completed job."""
        state: core.EstimatorState = estimator
        return core.track_job(state, outcome, capacity, self.justice)

    def waiting_filter(self, estimator: Any, free: int) -> WaitingFilter:
        """Algorithm 6 drops a waiting job when its request ``ceil(f * deadline / TTD * limit)``
        exceeds ``limit``, that is once ``TTD < f * deadline`` (``f``: the allocation fraction),
        or when TTD is gone: the horizon is ``f``, or 0 while bootstrapping (no fraction, the
        request is ``limit`` itself). CREATE_OFFERS admits whole requests only, from ``free``
        down, so a job whose request exceeds ``free`` stays queued."""
        state: core.EstimatorState = estimator
        fraction = core.allocation_fraction(state, self.justice)
        horizon = 0.0 if fraction is None else max(fraction, 0.0)
        return WaitingFilter(horizon, fraction, free)


def factory(variant: str) -> AdmissionPolicyFactory:
    """The ``PolicySpec.admission`` hook of ``variant``."""

    def make(values: Mapping[str, Any]) -> AdmissionPolicy:
        return JusticeAdmission(core.make_params(variant, values))

    return make
