"""The chances Promise's risks are priced at (``app/policies/promise/risk.py``), by hand."""

from __future__ import annotations

import pytest

from app.policies.promise import risk


def test_a_bounds_chance_follows_from_the_runs_it_was_taken_from() -> None:
    # the k = ceil(q n)-th smallest of n exchangeable runs is at least a new one k / (n + 1)
    assert risk.bound_chance(3, 0.95) == pytest.approx(3 / 4)
    assert risk.bound_chance(19, 0.95) == pytest.approx(19 / 20)
    assert risk.bound_chance(64, 0.95) == pytest.approx(61 / 65)
    assert risk.bound_chance(4, 0.5) == pytest.approx(2 / 5)
    assert risk.bound_chance(0, 0.95) == pytest.approx(1 / 2)  # the bootstrap bound


def test_a_new_run_falls_in_any_gap_between_the_runs_alike() -> None:
    works = [10.0, 20.0, 30.0]
    assert risk.run_share(works, 5.0, 40.0) == pytest.approx(0.5 / 4)
    assert risk.run_share(works, 20.0, 40.0) == pytest.approx(2 / 4)
    assert risk.run_share(works, 35.0, 40.0) == pytest.approx(3.5 / 4)
    assert risk.run_share(works, 40.0, 40.0) == 1.0
    # a wait no run shows still costs its share of the last gap
    assert risk.run_share(works, 32.0, 40.0) < risk.run_share(works, 38.0, 40.0) < 1.0
    # the last gap ends at the largest run when that exceeds the top
    assert risk.run_share(works, 30.0, 25.0) == 1.0
