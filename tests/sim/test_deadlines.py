"""Deadline types of thesis section 5.2.1: multiples of the optimal runtime, seeded."""

from __future__ import annotations

import pytest

from app.sim.deadlines import DEADLINE_TYPES, assign_deadlines, optimal_runtime
from app.sim.jobs import SimJob

JOBS = [SimJob(f"j{i}", float(i), 4, 100.0, runtime_s=50.0) for i in range(4000)]


def _multiples(kind: str, seed: int = 1) -> list[float]:
    # T_i = 100 vcore-s / min(4, 10) = 25 s
    return [j.deadline_s / 25.0 for j in assign_deadlines(JOBS, kind, 10, seed)]  # type: ignore[operator]


def test_fixed() -> None:
    assert set(_multiples("Fixed1x")) == {1.0}
    assert set(_multiples("Fixed2x")) == {2.0}


@pytest.mark.parametrize(
    ("kind", "low", "high", "p_high"),
    [
        ("Jockey1x2x", 1.0, 2.0, 0.5),
        ("Jockey2x4x", 2.0, 4.0, 0.5),
        ("90loose", 1.0, 2.0, 0.9),
    ],
)
def test_two_valued(kind: str, low: float, high: float, p_high: float) -> None:
    xs = _multiples(kind)
    assert set(xs) == {low, high}
    assert xs.count(high) / len(xs) == pytest.approx(p_high, abs=0.03)


@pytest.mark.parametrize(("kind", "low", "high"), [("Aria1x3x", 1, 3), ("Aria2x4x", 2, 4)])
def test_uniform(kind: str, low: float, high: float) -> None:
    xs = _multiples(kind)
    assert all(low <= x <= high for x in xs)
    assert sum(xs) / len(xs) == pytest.approx((low + high) / 2, abs=0.05)


def test_seeded_and_all_types_present() -> None:
    assert set(DEADLINE_TYPES) == {
        "Fixed1x",
        "Fixed2x",
        "Jockey1x2x",
        "Jockey2x4x",
        "90loose",
        "Aria1x3x",
        "Aria2x4x",
    }
    assert _multiples("Aria1x3x", 3) == _multiples("Aria1x3x", 3)
    assert _multiples("Aria1x3x", 3) != _multiples("Aria1x3x", 4)


def test_basis() -> None:
    job = JOBS[0]
    assert optimal_runtime(job, 2) == 50.0  # 100 / min(4, 2)
    assert optimal_runtime(job, 10, "trace") == 50.0
    with pytest.raises(ValueError):
        assign_deadlines(JOBS[:1], "Fixed3x", 10, 0)


def test_template_basis_follows_the_template_not_the_run() -> None:
    # Two runs of one template (ideal runtimes 10 s and 30 s on 1 vcore, median 20 s) and an
    # unnamed job, which keeps its own runtime.
    jobs = [
        SimJob("a", 0.0, 1, 10.0, name="etl"),
        SimJob("b", 1.0, 1, 30.0, name="etl"),
        SimJob("c", 2.0, 2, 50.0),
    ]
    got = [j.deadline_s for j in assign_deadlines(jobs, "Fixed2x", 10, 0, "template")]
    assert got == [40.0, 40.0, 50.0]
    own = [j.deadline_s for j in assign_deadlines(jobs, "Fixed2x", 10, 0)]
    assert own == [20.0, 60.0, 50.0]
    # the same multipliers are drawn whatever the basis
    for kind in ("Aria1x3x", "Jockey1x2x"):
        x_template = [
            j.deadline_s / t  # type: ignore[operator]
            for j, t in zip(
                assign_deadlines(jobs, kind, 10, 5, "template"), (20, 20, 25), strict=True
            )
        ]
        x_own = [
            j.deadline_s / t  # type: ignore[operator]
            for j, t in zip(assign_deadlines(jobs, kind, 10, 5), (10, 30, 25), strict=True)
        ]
        assert x_template == pytest.approx(x_own)
    with pytest.raises(ValueError):
        assign_deadlines(jobs, "Fixed2x", 10, 0, "guess")
