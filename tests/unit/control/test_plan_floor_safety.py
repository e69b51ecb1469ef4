"""Plans that keep the floors' promise and refuse what no cluster can hold: a queue below its
floor is lifted even when the move is under the minimum change, nothing is pushed while the
floors cannot be sized, and RRF's absolute amounts are checked (finite, >= 0, at most the
cluster). Expected numbers are worked out by hand in the comments."""

from __future__ import annotations

import math

import pytest

from app.control.budget import parse_bounds
from app.control.floors import Amount, compute
from app.control.plan import Limits, Plan, absolute_plan, percent_plan, plan_outcome
from app.domain.outcome import PolicyOutcome
from app.policies.base import PolicyError

CLUSTER = {"vcores": 8.0, "memory": 8192.0}
TOP = "[memory=8192,vcores=8]"


def live(**caps: str) -> dict[str, dict[str, str]]:
    return {f"root.{q}": {"capacity": c, "maximum-capacity": "100"} for q, c in caps.items()}


def absolute(**caps: str) -> dict[str, dict[str, str]]:
    return {f"root.{q}": {"capacity": c, "maximum-capacity": TOP} for q, c in caps.items()}


def vcores(value: str) -> int:
    return int(value.split("vcores=")[1].rstrip("]"))


def test_a_queue_below_its_floor_is_lifted_even_under_the_minimum_change() -> None:
    # a holds 22 with a floor of 25: the 3-point lift is below the 5-point minimum change, but
    # the floor is the harder promise
    limits = Limits(parse_bounds({"root.a": {"min": 25}}), max_step_h=1000, min_change_h=500)
    plan = percent_plan({"root.a": 0.0, "root.b": 1.0}, live(a="22", b="78"), limits)
    assert plan.push, plan.reason
    assert {q: v["capacity"] for q, v in plan.changes().items()} == {
        "root.a": "25.00",
        "root.b": "75.00",
    }
    # within its bounds, the same 3-point move stays below the minimum change
    inside = percent_plan({"root.a": 0.25, "root.b": 0.75}, live(a="28", b="72"), limits)
    assert not inside.push and "3.00 pp < minimum 5.00 pp" in inside.reason


def test_an_absolute_queue_below_its_floor_is_lifted_even_under_the_minimum_change() -> None:
    # a holds 1 vcore with a floor of 2: the move is 1/8 = 0.125 of the cluster, below 0.2
    now = absolute(a="[memory=1024,vcores=1]", b="[memory=7168,vcores=7]")
    alloc = {"root.a": {"vcores": 2, "memory": 1024}, "root.b": {"vcores": 6, "memory": 7168}}
    floor = {"root.a": {"vcores": 2.0, "memory": 256.0}}
    lifted = absolute_plan(alloc, now, CLUSTER, 0.5, 0.2, minimums=floor)
    assert lifted.push and lifted.changes()["root.a"]["capacity"] == "[memory=1024,vcores=2]"
    assert not absolute_plan(alloc, now, CLUSTER, 0.5, 0.2).push  # no floor: hysteresis holds


def test_nothing_is_pushed_while_the_floors_cannot_be_sized() -> None:
    # no running NodeManager: the parent's resources are unknown, so are 2 containers' share
    unknown = compute(["root.a", "root.b"], {}, Amount(1, 128), "test", Amount(0, 0), {})
    assert unknown.unsized == ("root.a", "root.b")
    outcome = PolicyOutcome(shares={"root.a": 0.95, "root.b": 0.05})
    kwargs = {"bounds": {}, "max_step_pp": 10.0, "min_change_pp": 1.0}
    plan = plan_outcome(outcome, live(a="75", b="25"), total={}, floors=unknown, **kwargs)
    assert not plan.push and plan.changes() == {}
    assert "cluster size unknown" in plan.reason and "root.a, root.b" in plan.reason
    # with the container floors turned off there is nothing to size: the plan goes on
    off = compute(["root.a", "root.b"], {"*": 0}, Amount(1, 128), "test", Amount(0, 0), {})
    assert off.unsized == ()
    assert plan_outcome(outcome, live(a="75", b="25"), total={}, floors=off, **kwargs).push


def _amounts_plan(a: dict[str, float], b: dict[str, float], max_step_pp: float = 10.0) -> Plan:
    floors = compute(["root.a", "root.b"], {}, Amount(1, 128), "test", Amount(8, 8192), {})
    return plan_outcome(
        PolicyOutcome(amounts={"root.a": a, "root.b": b}),
        absolute(a="[memory=4096,vcores=4]", b="[memory=4096,vcores=4]"),
        bounds={},
        max_step_pp=max_step_pp,
        min_change_pp=1.0,
        total=CLUSTER,
        floors=floors,
    )


@pytest.mark.parametrize("bad", [math.nan, math.inf, -40.0])
def test_amounts_that_are_not_finite_or_negative_are_a_policy_error(bad: float) -> None:
    with pytest.raises(PolicyError) as info:
        _amounts_plan({"vcores": bad, "memory": 4096.0}, {"vcores": 4.0, "memory": 4096.0})
    assert info.value.field == "amounts.root.a.vcores"


def test_amounts_beyond_the_cluster_are_scaled_to_it() -> None:
    # 1e12 and 3e12 vcores (1:3) of an 8-vcore cluster: 2 and 6; memory likewise 2048 and 6144
    plan = _amounts_plan(
        {"vcores": 1e12, "memory": 1e15}, {"vcores": 3e12, "memory": 3e15}, max_step_pp=100.0
    )
    assert plan.push
    changes = plan.changes()
    assert {q: v["capacity"] for q, v in changes.items()} == {
        "root.a": "[memory=2048,vcores=2]",
        "root.b": "[memory=6144,vcores=6]",
    }
    assert sum(vcores(v["capacity"]) for v in changes.values()) <= 8
    assert "allocations scaled to the cluster's vcores" in plan.lines["root.a"].reasons[0]
