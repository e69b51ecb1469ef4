"""Shares -> capacity percentages (app.policies.rounding; docs/policies.md "Common terms":
share)."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.policies.base import PolicyError
from app.policies.rounding import capacity_hundredths, capacity_percentages


def test_thirds_give_the_extra_hundredth_to_the_first_name() -> None:
    # 10000 / 3 = 3333.33 each: floors 3333 x 3 = 9999, one hundredth left, equal remainders,
    # so the name that sorts first ("a") gets it whatever the dict order.
    shares = {"c": 1 / 3, "a": 1 / 3, "b": 1 / 3}
    assert capacity_hundredths(shares) == {"c": 3333, "a": 3334, "b": 3333}
    assert capacity_percentages(shares) == {"c": 33.33, "a": 33.34, "b": 33.33}


def test_largest_remainder_wins() -> None:
    # targets 1234.56 and 8765.44: floors sum to 9999, the larger remainder (.56, "b") gets +1.
    assert capacity_hundredths({"a": 0.876544, "b": 0.123456}) == {"a": 8765, "b": 1235}


def test_shares_are_proportions() -> None:
    # 1 : 3 -> 25 % : 75 %, even though the shares sum to 4.
    assert capacity_percentages({"a": 1.0, "b": 3.0}) == {"a": 25.0, "b": 75.0}


def test_minimum_is_respected_and_taken_from_the_others() -> None:
    # a would get 1.00 % but its minimum is 10 %: a = 10.00, b gets the rest, 90.00.
    assert capacity_percentages({"a": 0.01, "b": 0.99}, {"a": 10}) == {"a": 10.0, "b": 90.0}


def test_minimum_is_rounded_up_to_hundredths() -> None:
    # 12.345 % must not become 12.34 (below the minimum): 1234.5 hundredths rounds up to 1235.
    assert capacity_hundredths({"a": 0.0, "b": 1.0}, {"a": 12.345}) == {"a": 1235, "b": 8765}


def test_pinning_cascades() -> None:
    # Pass 1: a's target 500 < 2000 -> a pinned at 2000; b's target 1500 = its minimum, free.
    # Pass 2: 8000 left for b (.15) and c (.80): b = .15 / .95 * 8000 = 1263.2 < 1500 -> pinned.
    # c = 10000 - 2000 - 1500 = 6500.
    got = capacity_hundredths({"a": 0.05, "b": 0.15, "c": 0.80}, {"a": 20, "b": 15})
    assert got == {"a": 2000, "b": 1500, "c": 6500}


def test_zero_share_without_minimum_gets_nothing() -> None:
    assert capacity_hundredths({"a": 0.0, "b": 0.5, "c": 0.5}) == {"a": 0, "b": 5000, "c": 5000}


@pytest.mark.parametrize(
    ("shares", "mins", "field"),
    [
        ({}, {}, "shares"),
        ({"a": -0.1, "b": 1.0}, {}, "shares.a"),
        ({"a": math.nan}, {}, "shares.a"),
        ({"a": math.inf}, {}, "shares.a"),
        ({"a": 0.0, "b": 0.0}, {}, "shares"),
        ({"a": 0.5, "b": 0.5}, {"a": 60, "b": 40.01}, "min_percent"),
        ({"a": 0.5, "b": 0.5}, {"z": 1}, "min_percent.z"),
        ({"a": 0.5, "b": 0.5}, {"a": -1}, "min_percent.a"),
        ({"a": 0.5, "b": 0.5}, {"a": 101}, "min_percent.a"),
        ({"a": 0.5, "b": 0.5}, {"a": math.nan}, "min_percent.a"),
    ],
)
def test_invalid_input_names_the_field(
    shares: dict[str, float], mins: dict[str, float], field: str
) -> None:
    with pytest.raises(PolicyError) as info:
        capacity_hundredths(shares, mins)
    assert info.value.field == field


_names = st.lists(st.text("abcdefgh", min_size=1, max_size=3), min_size=1, max_size=12, unique=True)


@st.composite
def _inputs(draw: st.DrawFn) -> tuple[dict[str, float], dict[str, float]]:
    names = draw(_names)
    values = st.floats(0, 10, allow_nan=False, allow_infinity=False)
    shares = {n: draw(values) for n in names}
    if sum(shares.values()) == 0:
        shares[names[0]] = 1.0
    mins: dict[str, float] = {}
    budget = 100.0
    for n in names:
        if draw(st.booleans()):
            m = draw(st.floats(0, budget / 2, allow_nan=False))
            mins[n] = m
            budget -= math.ceil(m * 100) / 100 + 0.01
    return shares, mins


@settings(max_examples=300, deadline=None)
@given(_inputs())
def test_sum_is_exactly_100_and_minimums_hold(
    data: tuple[dict[str, float], dict[str, float]],
) -> None:
    shares, mins = data
    hundredths = capacity_hundredths(shares, mins)
    assert sum(hundredths.values()) == 10000
    percents = capacity_percentages(shares, mins)
    assert sum(Decimal(f"{p:.2f}") for p in percents.values()) == Decimal("100.00")
    for name, m in mins.items():
        assert percents[name] >= m
    # the result never depends on the order of the input mapping
    assert capacity_hundredths(dict(reversed(list(shares.items()))), mins) == hundredths


@settings(max_examples=300, deadline=None)
@given(_inputs())
def test_without_minimums_each_queue_is_within_one_hundredth(
    data: tuple[dict[str, float], dict[str, float]],
) -> None:
    shares, _ = data
    total = sum(shares.values())
    for name, h in capacity_hundredths(shares).items():
        assert abs(h - shares[name] / total * 10000) < 1
