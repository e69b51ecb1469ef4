"""What the Promise planner's tests share: signatures, default parameters and an estimator
taught runs of one deadline ratio."""

from __future__ import annotations

from app.policies.promise import core
from app.policies.promise.estimator import Estimator, Outcome
from app.policies.promise.signature import Keys

K = Keys("sig", "ut", "q")
OTHER = Keys("sig2", "ut", "q")
P = core.PromiseParams()


def taught(ratio: float, runs: int = 3, keys: Keys = K) -> Estimator:
    """An estimator whose every run had ``work = ratio * deadline * tasks`` (tasks <= capacity)."""
    est = Estimator()
    for _ in range(runs):
        est.learn(Outcome(keys, tasks=4, work=ratio * 100.0 * 4, deadline_s=100.0, max_cpus=4))
    return est
