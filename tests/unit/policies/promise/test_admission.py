"""Promise behind the admission seam: the registry builds it; it books AM containers and plans
and learns exactly as ``core`` and ``Estimator`` do."""

from __future__ import annotations

from app.policies import registry
from app.policies.promise import core
from app.policies.promise.estimator import Estimator, Outcome, params_from
from app.policies.promise.signature import Keys

KEYS = Keys("n:etl|u:al", "u:al", "q:deadline")


def test_booked_counts_one_am_container_per_running_job() -> None:
    policy = registry.admission_policy("promise", {"am_containers": 1})
    assert policy.name == "promise" and policy.estimator_source == "history"
    running = [core.RunningJob("r1", 4, 100.0, 0.0, 0.0, 4, KEYS)]
    assert policy.booked(running) == 5
    assert registry.admission_policy("promise", {"am_containers": 0}).booked(running) == 4


def test_admit_and_learn_are_the_planner_and_estimator() -> None:
    values = core.make_params({"am_containers": 1})
    policy = registry.admission_policy("promise", {"am_containers": 1})
    est = Estimator(params_from(values))
    for _ in range(3):
        est = policy.learn(est, Outcome(KEYS, 4, 200.0, 100.0, 4), 10)
    assert est.samples(KEYS.signature) == 3
    waiting = [core.WaitingJob("w", 4, 100.0, 0.0, KEYS), core.WaitingJob("x", 40, 10.0, 0.0, KEYS)]
    got = policy.admit(waiting, [], 10, 10, 1.0, est)
    assert got == core.admit(waiting, [], 10, 10, 1.0, est, core.promise_params(values))
    assert {d.job_id for d in got} == {"w", "x"}
    assert "admit" in {d.action for d in got}
