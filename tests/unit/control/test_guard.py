"""The interference guard step by step, hand-computed: tighten while an SLO is violated, hold on
unknown readings, restore after the hysteresis, never below capacity or the floor."""

from __future__ import annotations

import pytest

from app.control.guard import GuardConfig, Reading, Slo, step
from app.control.plan import Limits, percent_plan
from app.policies.base import PolicyError

CFG = GuardConfig(
    slos=(Slo("web", 200.0, url="http://probe/"),),
    batch_queues=("root.etl", "root.adhoc"),
    step_pp=30,
    recover_ticks=2,
)
CAP = {"root.default": 4000, "root.etl": 2000, "root.adhoc": 2000}
MAX = {"root.default": 10000, "root.etl": 10000, "root.adhoc": 8000}


def bad() -> list[Reading]:
    return [Reading("web", 450.0, 200.0)]


def good() -> list[Reading]:
    return [Reading("web", 120.0, 200.0)]


def unknown() -> list[Reading]:
    return [Reading("web", None, 200.0, "refused")]


def test_an_episode_tightens_step_by_step_holds_then_restores_after_the_hysteresis() -> None:
    live_max = dict(MAX)
    state: dict[str, object] = {}
    seen = []
    for readings in (bad(), bad(), bad(), unknown(), good(), good(), good(), good(), good()):
        s = step(state, readings, CAP, live_max, CFG)
        state = s.state
        live_max.update(s.targets)  # the push lands
        seen.append((live_max["root.etl"], live_max["root.adhoc"]))
    assert seen == [
        (7000, 5000),  # 100 -> 70, 80 -> 50
        (4000, 2000),  # adhoc reaches its capacity (20 %): never below its guarantee
        (2000, 2000),
        (2000, 2000),  # unknown: held
        (2000, 2000),  # calm tick 1 of 2
        (5000, 5000),  # restoring, 30 pp a tick
        (8000, 8000),  # adhoc back at its 80
        (10000, 8000),  # restored: the guard clears
        (10000, 8000),  # and leaves the queues alone
    ]
    assert state == {}
    assert step({}, good(), CAP, MAX, CFG).targets == {}


def test_a_violation_during_the_restore_tightens_from_where_it_got_to() -> None:
    state = {"baseline": {"root.etl": 10000}, "caps": {"root.etl": 5000}, "calm": 2}
    s = step(state, bad(), CAP, {"root.etl": 5000}, CFG)
    assert s.targets == {"root.etl": 2000} and s.state["calm"] == 0
    assert s.state["baseline"] == {"root.etl": 10000}


def test_floor_pp_keeps_batch_queues_above_it() -> None:
    cfg = GuardConfig(CFG.slos, ("root.etl",), step_pp=50, floor_pp=35)
    assert step({}, bad(), CAP, MAX, cfg).targets == {"root.etl": 5000}
    assert step(
        {"baseline": {"root.etl": 10000}, "caps": {"root.etl": 5000}},
        bad(),
        CAP,
        {"root.etl": 5000},
        cfg,
    ).targets == {"root.etl": 3500}


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"batch_queues": ["root.a"]}, "slos"),
        (
            {"slos": [{"name": "w", "url": "ftp://x", "max_latency_ms": 1}], "batch_queues": ["a"]},
            "slos[0].url",
        ),
        (
            {"slos": [{"name": "w", "queue": "q", "url": "http://x"}], "batch_queues": ["a"]},
            "slos[0]",
        ),
        (
            {"slos": [{"name": "w", "queue": "q", "max_pending_s": -1}], "batch_queues": ["a"]},
            "slos[0].max_pending_s",
        ),
        (
            {"slos": [{"name": "w", "queue": "q", "max_pending_s": 5}], "batch_queues": []},
            "batch_queues",
        ),
        (
            {
                "slos": [{"name": "w", "queue": "q", "max_pending_s": 5}],
                "batch_queues": ["a"],
                "step_pp": 0,
            },
            "step_pp",
        ),
        (
            {
                "slos": [{"name": "w", "queue": "q", "max_pending_s": 5}],
                "batch_queues": ["a"],
                "x": 1,
            },
            "x",
        ),
    ],
)
def test_bad_configurations_name_the_field(data: dict[str, object], field: str) -> None:
    with pytest.raises(PolicyError) as info:
        GuardConfig.from_dict(data)
    assert info.value.field == field


def test_the_plan_pushes_guard_targets_even_when_capacities_stay() -> None:
    live = {
        "root.default": {"capacity": "60", "maximum-capacity": "100"},
        "root.etl": {"capacity": "20", "maximum-capacity": "100"},
        "root.adhoc": {"capacity": "20", "maximum-capacity": "80"},
    }
    shares = {"root.default": 0.6, "root.etl": 0.2, "root.adhoc": 0.2}
    plan = percent_plan(shares, live, Limits(max_targets={"root.etl": 7000, "root.adhoc": 1000}))
    # adhoc's target is below its capacity: maximum-capacity stops at the capacity
    assert plan.push and plan.changes() == {
        "root.etl": {"capacity": "20.00", "maximum-capacity": "70.00"},
        "root.adhoc": {"capacity": "20.00", "maximum-capacity": "20.00"},
    }
    assert "interference guard" in plan.reason
    assert not percent_plan(shares, live, Limits()).push
