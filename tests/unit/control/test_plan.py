"""Plans: shares -> exact-100 capacities, bounds, hysteresis, step limit, maximum-capacity.
Expected numbers are worked out by hand in the comments."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.control.budget import TOTAL, Bounds, parse_bounds, project_to_bounds, within_bounds
from app.control.drift import normalise
from app.control.plan import Limits, absolute_plan, percent_plan
from app.policies.base import PolicyError
from tests.unit.control.test_budget import vectors


def live(**caps: tuple[str, str]) -> dict[str, dict[str, str]]:
    return {f"root.{q}": {"capacity": c, "maximum-capacity": m} for q, (c, m) in caps.items()}


def caps(plan_changes: dict[str, dict[str, str]]) -> dict[str, str]:
    return {q: v["capacity"] for q, v in plan_changes.items()}


def test_step_limited_plan_moves_every_queue_the_same_fraction() -> None:
    # target 75/25 (b's minimum 25 holds); the largest move is 35 points, the step 10: 2/7
    plan = percent_plan(
        {"root.a": 0.75, "root.b": 0.25},
        live(a=("40", "100"), b=("60", "100")),
        Limits(parse_bounds({"root.b": {"min": 25}}), max_step_h=1000, min_change_h=100),
    )
    assert plan.push
    assert caps(plan.changes()) == {"root.a": "50.00", "root.b": "50.00"}
    assert plan.step_fraction == 2 / 7 or float(plan.step_fraction) == 2 / 7
    assert plan.previous() == {
        "root.a": {"capacity": "40", "maximum-capacity": "100"},
        "root.b": {"capacity": "60", "maximum-capacity": "100"},
    }


def test_minimum_bound_is_honoured_before_rounding() -> None:
    # shares 0.95 / 0.05 with b >= 20: target 80 / 20; within a step of 50 the target itself
    plan = percent_plan(
        {"root.a": 0.95, "root.b": 0.05},
        live(a=("50", "100"), b=("50", "100")),
        Limits(parse_bounds({"root.b": {"min": 20}}), max_step_h=5000, min_change_h=100),
    )
    assert caps(plan.changes()) == {"root.a": "80.00", "root.b": "20.00"}


def test_maximum_bound_moves_the_surplus_to_the_others() -> None:
    # target 70/20/10, a <= 50: 20 points to b and c by 2:1 -> 63.33... hand: b 33.33, c 16.67
    # (largest remainder: b 3333.33 -> 3333, c 1666.67 -> 1667)
    plan = percent_plan(
        {"root.a": 0.7, "root.b": 0.2, "root.c": 0.1},
        live(a=("50", "100"), b=("30", "100"), c=("20", "100")),
        Limits(parse_bounds({"root.a": {"max": 50}}), max_step_h=10000, min_change_h=100),
    )
    assert caps(plan.changes()) == {"root.b": "33.33", "root.c": "16.67"}
    assert plan.lines["root.a"].numbers["target_h"] == 7000
    assert plan.lines["root.a"].numbers["bounded_h"] == 5000


def test_hysteresis_skips_small_changes() -> None:
    # target 40.50 / 59.50: half a point < the 1-point minimum change
    plan = percent_plan(
        {"root.a": 0.405, "root.b": 0.595},
        live(a=("40", "100"), b=("60", "100")),
        Limits(max_step_h=1000, min_change_h=100),
    )
    assert not plan.push and "0.50 pp < minimum 1.00 pp" in plan.reason
    assert plan.changes() == {}
    # Fawkes' hysteresis is tau: without a minimum change the half point is pushed
    fawkes_like = percent_plan(
        {"root.a": 0.405, "root.b": 0.595},
        live(a=("40", "100"), b=("60", "100")),
        Limits(max_step_h=1000, min_change_h=0),
    )
    assert fawkes_like.push and caps(fawkes_like.changes()) == {
        "root.a": "40.50",
        "root.b": "59.50",
    }


def test_identical_configuration_is_no_change() -> None:
    plan = percent_plan(
        {"root.a": 0.5, "root.b": 0.5},
        live(a=("50.0", "100"), b=("50", "-1")),
        Limits(max_step_h=1000, min_change_h=0),
    )
    assert not plan.push and plan.reason == "no change"


def test_maximum_capacity_is_raised_to_fit_the_capacity() -> None:
    plan = percent_plan(
        {"root.a": 0.5, "root.b": 0.5},
        live(a=("40", "45"), b=("60", "100")),
        Limits(max_step_h=1000, min_change_h=100),
    )
    assert plan.changes()["root.a"] == {"capacity": "50.00", "maximum-capacity": "50.00"}
    assert plan.changes()["root.b"] == {"capacity": "50.00", "maximum-capacity": "100.00"}


def test_no_borrowing_sets_maximum_capacity_to_capacity_even_without_a_capacity_change() -> None:
    # a policy whose queues run on fixed shares (Fawkes' None): maximum-capacity follows capacity,
    # down as well as up, and is pushed even when the capacities themselves stay
    moved = percent_plan(
        {"root.a": 0.3, "root.b": 0.7},
        live(a=("40", "100"), b=("60", "100")),
        Limits(max_step_h=1000, min_change_h=100, no_borrowing=True),
    )
    assert moved.changes()["root.a"] == {"capacity": "30.00", "maximum-capacity": "30.00"}
    assert moved.changes()["root.b"] == {"capacity": "70.00", "maximum-capacity": "70.00"}
    kept = percent_plan(
        {"root.a": 0.4, "root.b": 0.6},
        live(a=("40", "100"), b=("60", "60")),
        Limits(max_step_h=1000, min_change_h=100, no_borrowing=True),
    )
    assert kept.push and kept.changes() == {
        "root.a": {"capacity": "40.00", "maximum-capacity": "40.00"}
    }
    settled = percent_plan(
        {"root.a": 0.4, "root.b": 0.6},
        live(a=("40", "40"), b=("60", "60")),
        Limits(max_step_h=1000, min_change_h=100, no_borrowing=True),
    )
    assert not settled.push


def test_step_limit_is_waived_when_live_does_not_sum_to_100() -> None:
    # live 33.33 x 3 = 99.99: a fraction of the way would not sum to 100, so the target is used
    plan = percent_plan(
        {"root.a": 0.6, "root.b": 0.2, "root.c": 0.2},
        live(a=("33.33", "100"), b=("33.33", "100"), c=("33.33", "100")),
        Limits(max_step_h=1000, min_change_h=100),
    )
    assert caps(plan.changes()) == {"root.a": "60.00", "root.b": "20.00", "root.c": "20.00"}
    assert "not 100: step limit waived" in plan.reason


def test_zero_shares_keep_the_configuration() -> None:
    plan = percent_plan({"root.a": 0.0}, live(a=("50", "100"), b=("50", "100")), Limits())
    assert not plan.push and plan.changes() == {}


def test_bounds_that_cannot_sum_to_100_are_an_error_naming_bounds() -> None:
    with pytest.raises(PolicyError) as exc:
        percent_plan(
            {"root.a": 0.5, "root.b": 0.5},
            live(a=("50", "100"), b=("50", "100")),
            Limits(parse_bounds({"root.a": {"max": 40}, "root.b": {"max": 50}})),
        )
    assert exc.value.field == "bounds" and "maximums sum to 90.00" in exc.value.message


def test_absolute_plan_for_rrf_is_step_limited_in_fractions_of_the_cluster() -> None:
    cluster = {"vcores": 8.0, "memory": 8192.0}
    alloc = {"root.a": {"vcores": 6, "memory": 4096}, "root.b": {"vcores": 2, "memory": 4096}}
    # live 50/50 of root = 4 vcores / 4096 MB each; the largest move is 2 of 8 vcores = 0.25;
    # step 0.1 -> 0.4 of the way: a 4.8, b 3.2 vcores -> largest remainder of 8: a 5, b 3
    plan = absolute_plan(alloc, live(a=("50", "100"), b=("50", "100")), cluster, 0.1, 0.01)
    assert plan.push and plan.changes() == {
        "root.a": {
            "capacity": "[memory=4096,vcores=5]",
            "maximum-capacity": "[memory=8192,vcores=8]",
        },
        "root.b": {
            "capacity": "[memory=4096,vcores=3]",
            "maximum-capacity": "[memory=8192,vcores=8]",
        },
    }
    top = "[memory=8192,vcores=8]"
    done = {
        "root.a": {"capacity": "[vcores=6, memory=4096]", "maximum-capacity": top},
        "root.b": {"capacity": "[memory=4096,vcores=2]", "maximum-capacity": top},
    }
    assert not absolute_plan(alloc, done, cluster, 0.1, 0.01).push
    # one vcore of 8 (0.125 of the cluster) is below a 0.2 minimum change, above 0.1
    near = {
        "root.a": {"capacity": "[memory=4096,vcores=5]", "maximum-capacity": top},
        "root.b": {"capacity": "[memory=4096,vcores=3]", "maximum-capacity": top},
    }
    assert not absolute_plan(alloc, near, cluster, 0.5, 0.2).push
    pushed = absolute_plan(alloc, near, cluster, 0.5, 0.1)
    assert {q: v["capacity"] for q, v in pushed.changes().items()} == {
        "root.a": "[memory=4096,vcores=6]",
        "root.b": "[memory=4096,vcores=2]",
    }


# ---- properties --------------------------------------------------------------------------------


@st.composite
def plan_case(
    draw: st.DrawFn,
) -> tuple[dict[str, float], dict[str, int], dict[str, Bounds], int, int]:
    n = draw(st.integers(1, 5))
    names = [f"root.q{i}" for i in range(n)]
    inside = draw(vectors(names))
    bounds = {
        q: Bounds(v - draw(st.integers(0, v)), v + draw(st.integers(0, TOTAL - v)))
        for q, v in inside.items()
    }
    current, _ = project_to_bounds(draw(vectors(names)), bounds)
    shares = {q: draw(st.floats(0, 1)) for q in names}
    if not any(shares.values()):
        shares[names[0]] = 1.0
    return shares, current, bounds, draw(st.integers(1, TOTAL)), draw(st.integers(0, 500))


@given(plan_case())
def test_plan_properties(
    case: tuple[dict[str, float], dict[str, int], dict[str, Bounds], int, int],
) -> None:
    shares, current, bounds, step, min_change = case
    values = {
        q: {"capacity": f"{v / 100:.2f}", "maximum-capacity": "100"} for q, v in current.items()
    }
    plan = percent_plan(shares, values, Limits(bounds, max_step_h=step, min_change_h=min_change))
    planned = {q: normalise(line.planned["capacity"]) for q, line in plan.lines.items()}
    assert all(isinstance(v, int) for v in planned.values())
    ints = {q: int(v) for q, v in planned.items()}  # type: ignore[call-overload]
    assert sum(ints.values()) == TOTAL  # exactly 100.00
    assert within_bounds(ints, bounds)
    assert all(abs(ints[q] - current[q]) <= step for q in current)
    if plan.push:
        assert max(abs(ints[q] - current[q]) for q in current) >= 1
    else:
        assert ints == current  # nothing moves without a push
    # hysteresis: a target closer than the minimum change is never pushed
    targets = {q: line.numbers.get("bounded_h", current[q]) for q, line in plan.lines.items()}
    if max(abs(int(targets[q]) - current[q]) for q in current) < min_change:
        assert not plan.push
