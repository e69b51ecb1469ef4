"""Grants in waves and release timelines (``app/policies/promise/grants.py``) by hand."""

from __future__ import annotations

from app.policies.promise import grants


def test_waves_aligned_and_min_grant_by_hand() -> None:
    assert grants.waves(10, 4) == 3 and grants.waves(10, 5) == 2 and grants.waves(3, 8) == 1
    assert grants.aligned(10, 4) == 4  # 3 waves need ceil(10/3) = 4 containers
    assert grants.aligned(10, 6) == 5  # 6 containers also take 2 waves; 5 do the same
    # 10 tasks of 10 s in 35 s: at most 3 waves, so ceil(10 / 3) = 4 containers
    assert grants.min_grant(10, 10, 10.0, 35.0) == 4
    assert grants.min_grant(10, 3, 10.0, 35.0) is None  # needs 4 > limit 3
    assert grants.min_grant(10, 10, 10.0, 9.0) is None  # not even one wave fits
    assert grants.min_grant(1, 1, 10.0, 10.0) == 1


def test_divisible_work_by_hand() -> None:
    # The fluid model: n tasks' work on g vcores takes n / g task durations, fractions included.
    assert grants.waves(10, 4, True) == 2.5 and grants.waves(3, 8, True) == 1.0
    assert grants.aligned(10, 6, True) == 6 and grants.aligned(3, 8, True) == 3
    # 10 tasks of 10 s in 35 s: 100 vcore-s / 35 s = 2.86, so 3 vcores (whole waves need 4)
    assert grants.min_grant(10, 10, 10.0, 35.0, True) == 3
    assert grants.min_grant(10, 10, 10.0, 50.0, True) == 2  # exactly 50 s on 2
    assert grants.min_grant(10, 2, 10.0, 35.0, True) is None  # needs 3 > limit 2
    assert grants.min_grant(10, 10, 10.0, 9.0, True) is None  # no grant runs a task in 9 s
