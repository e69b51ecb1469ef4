"""Proportional shares (``app.policies.proportional.core``)."""

from __future__ import annotations

import pytest

from app.policies.base import PolicyError
from app.policies.proportional.core import shares


def test_floor_then_the_rest_by_pending_demand() -> None:
    # 1 - 3 * 0.1 = 0.7 split 30:10:0
    assert shares({"a": 30, "b": 10, "c": 0}, 0.1) == pytest.approx(
        {"a": 0.1 + 0.7 * 0.75, "b": 0.1 + 0.7 * 0.25, "c": 0.1}
    )


def test_nothing_pending_gives_equal_shares() -> None:
    assert shares({"a": 0, "b": 0}, 0.2) == {"a": 0.5, "b": 0.5}


def test_a_floor_above_one_over_n_means_equal_shares() -> None:
    assert shares({"a": 5, "b": 1}, 0.9) == pytest.approx({"a": 0.5, "b": 0.5})


@pytest.mark.parametrize("pending", [{"a": 1.0, "b": 2.0, "c": 7.0}, {"x": 0.0, "y": 3.5}])
def test_shares_sum_to_one(pending: dict[str, float]) -> None:
    assert sum(shares(pending, 0.05).values()) == pytest.approx(1.0)


def test_bad_input_names_the_field() -> None:
    with pytest.raises(PolicyError, match=r"pending\.b"):
        shares({"a": 1, "b": float("nan")}, 0.1)
    with pytest.raises(PolicyError, match="queues"):
        shares({}, 0.1)
