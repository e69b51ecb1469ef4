"""The idle-cluster rule (``app.control.idle``): what counts as no demand, where the baseline
comes from, and that the return is an ordinary step-limited plan."""

from __future__ import annotations

from app.control.budget import Bounds
from app.control.decide import PolicyOutcome
from app.control.idle import baseline, no_demand, toward_baseline
from app.control.plan import Limits, percent_plan
from app.domain.observation import ClusterTotals, PolicyInputs, QueueInputs

QUEUES = ["root.a", "root.b"]


def inputs(**busy: float) -> PolicyInputs:
    def q(used: float) -> QueueInputs:
        return QueueInputs(1, used, 0, 0, 0, 0, 0, 1 if used else 0, 0, 0, 0, 0)

    return PolicyInputs(
        60_000, 0, 60.0, ClusterTotals(8, 8192), {f"root.{n}": q(busy.get(n, 0)) for n in "ab"}
    )


def test_no_demand_means_nothing_used_pending_or_running() -> None:
    assert no_demand(inputs(), QUEUES)
    assert not no_demand(inputs(b=0.1), QUEUES)


def test_baseline_sources_in_order() -> None:
    accepted = {"root.a": {"capacity": "30"}, "root.b": {"capacity": "70"}}
    first = {"root.a": {"capacity": "50.00"}, "root.b": {"capacity": "50.00"}}
    assert baseline({"root.a": 10, "root.b": 90}, accepted, first, QUEUES)[0] == {
        "root.a": 10.0,
        "root.b": 90.0,
    }
    assert baseline({}, accepted, first, QUEUES) == (
        {"root.a": 30.0, "root.b": 70.0},
        "configuration accepted by the operator",
    )
    assert baseline({}, None, first, QUEUES)[0] == {"root.a": 50.0, "root.b": 50.0}
    # absolute values left by RRF are no percentage baseline; nothing pushed: no baseline
    absolute = {q: {"capacity": "[memory=4096,vcores=4]"} for q in QUEUES}
    assert baseline({}, None, absolute, QUEUES)[0] is None
    assert baseline({}, None, None, QUEUES)[0] is None


def test_the_way_back_is_step_limited_and_respects_floors() -> None:
    policy = PolicyOutcome(shares={"root.a": 1.0, "root.b": 0.0}, note="policy's own")
    back = toward_baseline(policy, {"root.a": 40.0, "root.b": 60.0}, "test", {})
    assert back.shares == {"root.a": 0.4, "root.b": 0.6} and back.min_change_applies
    assert back.details["idle_rule"]["policy_note"] == "policy's own"
    live = {"root.a": {"capacity": "90.00"}, "root.b": {"capacity": "10.00"}}
    plan = percent_plan(back.shares, live, Limits({"root.b": Bounds(2500, 10000)}, 1000, 100))
    # the live 10 is below b's floor of 25: lifted to it at once (75/25), then 10 points more
    assert plan.changes()["root.b"]["capacity"] == "35.00"
    live = {"root.a": {"capacity": "70.00"}, "root.b": {"capacity": "30.00"}}
    plan = percent_plan(back.shares, live, Limits({"root.b": Bounds(2500, 10000)}, 1000, 100))
    assert plan.changes()["root.a"]["capacity"] == "60.00"  # 10 points, not 30
    rrf = toward_baseline(
        PolicyOutcome(amounts={}),
        {"root.a": 25.0, "root.b": 75.0},
        "t",
        {"vcores": 8, "memory": 8192},
    )
    assert rrf.amounts == {
        "root.a": {"vcores": 2.0, "memory": 2048.0},
        "root.b": {"vcores": 6.0, "memory": 6144.0},
    }
