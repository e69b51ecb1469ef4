"""Sharing the latest plan of queued jobs' ETAs among readers (``app.jobs.eta_plans``)."""

from __future__ import annotations

from typing import Any

from app.jobs.eta_plans import EtaPlans, QueuedPlan

POLICY = {"quantile": 0.95}


def _eta(job_id: str, latest_start_s: float | None = 100.0) -> dict[str, Any]:
    return {"id": job_id, "action": "queue", "latest_start_s": latest_start_s}


class Planner:
    """Makes plans of the given jobs at the given time and counts them."""

    def __init__(self, *job_ids: str, policy: dict[str, Any] = POLICY) -> None:
        self.job_ids = job_ids
        self.policy = policy
        self.made: list[int] = []

    def at(self, now_ms: int) -> QueuedPlan:
        self.made.append(now_ms)
        return QueuedPlan(now_ms, self.policy, {j: _eta(j) for j in self.job_ids})


def test_readers_share_a_plan_until_it_is_an_interval_old() -> None:
    plans = EtaPlans(max_age_ms=5_000)
    planner = Planner("a", "b")
    assert plans.eta("a", POLICY, 10_000, lambda: planner.at(10_000)) == _eta("a")
    assert plans.eta("b", POLICY, 15_000, lambda: planner.at(15_000)) == _eta("b")
    assert planner.made == [10_000]
    assert plans.eta("b", POLICY, 15_001, lambda: planner.at(15_001)) == _eta("b")
    assert planner.made == [10_000, 15_001]


def test_a_round_s_plan_answers_readers_and_a_later_plan_is_not_replaced_by_an_older() -> None:
    plans = EtaPlans(max_age_ms=5_000)
    plans.remember(QueuedPlan(12_000, POLICY, {"a": _eta("a", 50.0)}))
    plans.remember(QueuedPlan(11_000, POLICY, {"a": _eta("a", 40.0)}))
    planner = Planner("a")
    assert plans.eta("a", POLICY, 13_000, lambda: planner.at(13_000)) == _eta("a", 50.0)
    assert planner.made == []


def test_a_new_plan_for_another_policy_a_job_it_lacks_or_a_latest_start_passed() -> None:
    plans = EtaPlans(max_age_ms=60_000)
    plans.remember(QueuedPlan(10_000, POLICY, {"a": _eta("a", 20.0), "b": _eta("b", None)}))
    other = {"quantile": 0.9}
    assert plans.eta("a", other, 10_000, lambda: Planner("a", policy=other).at(10_000)) is not None
    planner = Planner("a", "b", "c")
    plans.remember(QueuedPlan(10_000, POLICY, {"a": _eta("a", 20.0), "b": _eta("b", None)}))
    assert plans.eta("a", POLICY, 20_000, lambda: planner.at(20_000)) == _eta("a", 20.0)
    assert plans.eta("b", POLICY, 20_001, lambda: planner.at(20_001)) == _eta("b", None)
    assert planner.made == []  # latest start 20 s not passed at 20.0 s; none for b
    plans.remember(QueuedPlan(10_000, POLICY, {"a": _eta("a", 20.0)}))
    assert plans.eta("a", POLICY, 20_001, lambda: planner.at(20_001)) == _eta("a")
    assert plans.eta("c", POLICY, 20_002, lambda: planner.at(20_002)) == _eta("c")
    assert planner.made == [20_001]  # the second plan had c already
    assert plans.eta("gone", POLICY, 20_003, lambda: planner.at(20_003)) is None


def test_while_one_reader_plans_the_others_answer_from_the_plan_before() -> None:
    plans = EtaPlans(max_age_ms=1_000)
    plans.remember(QueuedPlan(0, POLICY, {"a": _eta("a"), "b": _eta("b")}))
    seen: dict[str, Any] = {}
    nested = Planner("a", "b", "new")

    def slow_plan() -> QueuedPlan:
        # Other readers arrive while this plan is being made (the plan before is expired).
        seen["b"] = plans.eta("b", POLICY, 5_000, lambda: nested.at(5_000))
        seen["new"] = plans.eta("new", POLICY, 5_000, lambda: nested.at(5_000))
        return Planner("a", "b", "new").at(5_000)

    assert plans.eta("a", POLICY, 5_000, slow_plan) == _eta("a")
    assert seen["b"] == _eta("b")  # the expired plan's, without planning
    assert seen["new"] == _eta("new")  # not in it: planned for itself, without waiting
    assert nested.made == [5_000]
