"""Budgets on a capacity plan: bounds projection, step limit, exact sums.

Expected values are computed by hand in the comments; properties check the invariants on random
inputs (sum exactly 100.00, bounds, step limit)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.control.budget import (
    TOTAL,
    Bounds,
    check_feasible,
    format_hundredths,
    limit_step,
    parse_bounds,
    project_to_bounds,
    round_preserving_sum,
    within_bounds,
)
from app.policies.base import PolicyError


def test_parse_bounds_rounds_inward_and_names_bad_fields() -> None:
    got = parse_bounds({"root.a": {"min": 10.001, "max": 59.999}, "root.b": {}})
    # a minimum rounds up and a maximum down to hundredths: never looser than written
    assert got == {"root.a": Bounds(1001, 5999), "root.b": Bounds(0, 10000)}
    cases: list[tuple[dict[str, object], str]] = [
        ({"root.a": {"min": 70, "max": 60}}, "bounds.root.a.min"),
        ({"root.a": {"min": -1}}, "bounds.root.a.min"),
        ({"root.a": {"max": 101}}, "bounds.root.a.max"),
        ({"root.a": {"low": 1}}, "bounds.root.a.low"),
        ({"root.a": 5}, "bounds.root.a"),
        ({"root.a": {"min": "10"}}, "bounds.root.a.min"),
    ]
    for raw, field in cases:
        with pytest.raises(PolicyError) as exc:
            parse_bounds(raw)
        assert exc.value.field == field


def test_feasibility_needs_minimums_at_most_and_maximums_at_least_100() -> None:
    check_feasible({"a": Bounds(5000, 10000), "b": Bounds(5000, 10000)}, ["a", "b"])
    with pytest.raises(PolicyError, match=r"minimums sum to 100\.01"):
        check_feasible({"a": Bounds(5001, 10000), "b": Bounds(5000, 10000)}, ["a", "b"])
    with pytest.raises(PolicyError, match=r"maximums sum to 99\.99"):
        check_feasible({"a": Bounds(0, 4999), "b": Bounds(0, 5000)}, ["a", "b"])


def test_format_hundredths() -> None:
    assert [format_hundredths(v) for v in (0, 5, 3333, 10000)] == [
        "0.00",
        "0.05",
        "33.33",
        "100.00",
    ]


@pytest.mark.parametrize(
    ("target", "bounds", "expected"),
    [
        # a capped at 60: the 20 points go to b and c in proportion to their targets (1:1)
        (
            {"a": 8000, "b": 1000, "c": 1000},
            {"a": Bounds(0, 6000)},
            {"a": 6000, "b": 2000, "c": 2000},
        ),
        # b raised to its minimum 20: the 15 points come from a, the only free queue
        ({"a": 9500, "b": 500}, {"b": Bounds(2000, 10000)}, {"a": 8000, "b": 2000}),
        # a capped at 50 frees 20 points; b:c = 2:1 would give c 6.67 but c stops at 15 (+5),
        # so b takes 13.33 + the remaining 1.67 = 15 -> b 35
        (
            {"a": 7000, "b": 2000, "c": 1000},
            {"a": Bounds(0, 5000), "c": Bounds(0, 1500)},
            {"a": 5000, "b": 3500, "c": 1500},
        ),
        # nothing to do
        ({"a": 5000, "b": 5000}, {"a": Bounds(4000, 6000)}, {"a": 5000, "b": 5000}),
    ],
)
def test_project_to_bounds_table(
    target: dict[str, int], bounds: dict[str, Bounds], expected: dict[str, int]
) -> None:
    got, _ = project_to_bounds(target, bounds)
    assert got == expected


@pytest.mark.parametrize(
    ("live", "target", "step", "expected", "fraction"),
    [
        # biggest move 35 points, step 10: every queue goes 2/7 of its way
        (
            {"a": 4000, "b": 6000},
            {"a": 7500, "b": 2500},
            1000,
            {"a": 5000, "b": 5000},
            Fraction(2, 7),
        ),
        # biggest move 30 points: 1/3 of the way
        (
            {"a": 5000, "b": 3000, "c": 2000},
            {"a": 2000, "b": 3000, "c": 5000},
            1000,
            {"a": 4000, "b": 3000, "c": 3000},
            Fraction(1, 3),
        ),
        # f = 1000/6667: a +1000 exactly; b 3333 - 499.925 = 2833.075, c 3334 - 500.075 =
        # 2833.925; floors leave one hundredth, c has the larger remainder
        (
            {"a": 3333, "b": 3333, "c": 3334},
            {"a": 10000, "b": 0, "c": 0},
            1000,
            {"a": 4333, "b": 2833, "c": 2834},
            Fraction(1000, 6667),
        ),
        # within the step: the target itself
        ({"a": 4000, "b": 6000}, {"a": 4500, "b": 5500}, 1000, {"a": 4500, "b": 5500}, Fraction(1)),
    ],
)
def test_limit_step_table(
    live: dict[str, int],
    target: dict[str, int],
    step: int,
    expected: dict[str, int],
    fraction: Fraction,
) -> None:
    assert limit_step(live, target, step) == (expected, fraction)


def test_round_preserving_sum_breaks_ties_by_name() -> None:
    thirds = {q: Fraction(10000, 3) for q in ("b", "a", "c")}
    assert round_preserving_sum(thirds) == {"a": 3334, "b": 3333, "c": 3333}


# ---- properties --------------------------------------------------------------------------------


@st.composite
def vectors(draw: st.DrawFn, names: list[str]) -> dict[str, int]:
    """Whole hundredths over ``names`` summing to exactly 10000."""
    cuts = sorted(
        draw(st.lists(st.integers(0, TOTAL), min_size=len(names) - 1, max_size=len(names) - 1))
    )
    edges = [0, *cuts, TOTAL]
    return {q: edges[i + 1] - edges[i] for i, q in enumerate(names)}


@st.composite
def bounded_case(draw: st.DrawFn) -> tuple[dict[str, Bounds], dict[str, int], dict[str, int]]:
    """Feasible bounds, a target and a live vector inside them (both summing to 10000)."""
    n = draw(st.integers(1, 6))
    names = [f"root.q{i}" for i in range(n)]
    inside = draw(vectors(names))
    bounds = {
        q: Bounds(v - draw(st.integers(0, v)), v + draw(st.integers(0, TOTAL - v)))
        for q, v in inside.items()
    }
    other = draw(vectors(names))
    # a second vector inside the same bounds: the projection of a random one
    live, _ = project_to_bounds(other, bounds)
    target = draw(vectors(names))
    return bounds, target, live


@given(bounded_case())
def test_projection_sums_to_100_and_respects_bounds(
    case: tuple[dict[str, Bounds], dict[str, int], dict[str, int]],
) -> None:
    bounds, target, _ = case
    got, _ = project_to_bounds(target, bounds)
    assert sum(got.values()) == TOTAL
    assert within_bounds(got, bounds)


@given(bounded_case(), st.integers(1, TOTAL))
def test_step_limit_keeps_sum_bounds_and_step(
    case: tuple[dict[str, Bounds], dict[str, int], dict[str, int]], step: int
) -> None:
    bounds, raw_target, live = case
    target, _ = project_to_bounds(raw_target, bounds)
    planned, fraction = limit_step(live, target, step)
    assert sum(planned.values()) == TOTAL
    assert within_bounds(planned, bounds)
    assert all(abs(planned[q] - live[q]) <= step for q in live)
    assert all(min(live[q], target[q]) <= planned[q] <= max(live[q], target[q]) for q in live)
    assert 0 < fraction <= 1
