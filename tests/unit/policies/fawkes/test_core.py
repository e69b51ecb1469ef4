"""Fawkes weights, water-fill, discrimination, admission (seed 000 sec. 4; docs/policies.md)."""

from __future__ import annotations

import json
import math

import pytest

from app.policies.base import PolicyError
from app.policies.fawkes import core as fawkes
from app.policies.fawkes.core import FawkesParams, FawkesState, FawkesTick, QueueSample

# One interval's averaged samples for three queues; every weighting below is computed by hand
# from these numbers.
SAMPLES = {
    "a": QueueSample(
        waiting_jobs=2,
        waiting_tasks=20,
        waiting_input_bytes=1e9,
        running_jobs=1,
        vcore_utilization=0.9,
        memory_utilization=0.5,
        completed_jobs=2,
        completed_tasks=10,
        slowdowns=(1.0, 3.0),
    ),
    "b": QueueSample(
        waiting_jobs=1,
        waiting_tasks=30,
        waiting_input_bytes=3e9,
        vcore_utilization=0.3,
        memory_utilization=0.1,
        completed_jobs=0,
        completed_tasks=30,
        slowdowns=(4.0,),
    ),
    "c": QueueSample(
        waiting_jobs=1,
        running_jobs=2,
        vcore_utilization=0.6,
        memory_utilization=0.4,
        completed_jobs=1,
        completed_tasks=5,
    ),
}
TICK = FawkesTick(t=0, queues=SAMPLES)
ABC = ("a", "b", "c")


def _weights(weighting: str, psi: float = 0.5, a: float = 2.0) -> dict[str, float]:
    params = FawkesParams(weighting=weighting, psi=psi, a=a, min_shares={"a": 0.2, "b": 0.1})
    return fawkes.weights(TICK, ABC, params)


@pytest.mark.parametrize(
    ("weighting", "extra", "expected"),
    [
        # JD: waiting jobs 2, 1, 1 -> 2/4, 1/4, 1/4
        ("JD", {}, {"a": 0.5, "b": 0.25, "c": 0.25}),
        # DD: waiting input bytes 1e9, 3e9, 0 (unknown) -> 1/4, 3/4, 0
        ("DD", {}, {"a": 0.25, "b": 0.75, "c": 0.0}),
        # TD: waiting tasks 20, 30, 0 -> 20/50, 30/50, 0
        ("TD", {}, {"a": 0.4, "b": 0.6, "c": 0.0}),
        # PU: vcore utilization .9, .3, .6 (sum 1.8) -> .5, 1/6, 1/3
        ("PU", {}, {"a": 0.5, "b": 1 / 6, "c": 1 / 3}),
        # DU: memory utilization .5, .1, .4 (sum 1) -> as is
        ("DU", {}, {"a": 0.5, "b": 0.1, "c": 0.4}),
        # RU psi .25: a .25*.9+.75*.5 = .6, b .075+.075 = .15, c .15+.3 = .45; sum 1.2
        ("RU", {"psi": 0.25}, {"a": 0.5, "b": 0.125, "c": 0.375}),
        # RU psi .5 (default): a .7, b .2, c .5; sum 1.4
        ("RU", {}, {"a": 0.5, "b": 0.2 / 1.4, "c": 0.5 / 1.4}),
        # JS: mean slowdowns 2, 4, none (0) -> 2/6, 4/6, 0
        ("JS", {}, {"a": 1 / 3, "b": 2 / 3, "c": 0.0}),
        # JT a=2: q = completed/waiting jobs = 2/2, 0/1, 1/1 -> 2^-1, 2^0, 2^-1 = .5, 1, .5; sum 2
        ("JT", {}, {"a": 0.25, "b": 0.5, "c": 0.25}),
        # TT a=4: q = 10/20, 30/30, c has no waiting tasks -> 4^-.5, 4^-1, 0 = .5, .25, 0
        ("TT", {"a": 4.0}, {"a": 2 / 3, "b": 1 / 3, "c": 0.0}),
        # TT a=2: 2^-.5 = .70711, 2^-1 = .5 -> .70711/1.20711, .5/1.20711
        ("TT", {}, {"a": 0.5857864376, "b": 0.4142135624, "c": 0.0}),
        # EQ: 1 each -> 1/3
        ("EQ", {}, {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}),
        # None: the minimum shares, not normalised (c has none -> 0)
        ("None", {}, {"a": 0.2, "b": 0.1, "c": 0.0}),
    ],
)
def test_each_weighting_by_hand(
    weighting: str, extra: dict[str, float], expected: dict[str, float]
) -> None:
    got = _weights(weighting, **extra)
    assert got == pytest.approx(expected, abs=1e-9)


def test_all_zero_samples_fall_back_to_eq() -> None:
    idle = FawkesTick(t=0, queues={q: QueueSample(running_jobs=1) for q in ABC})
    got = fawkes.weights(idle, ABC, FawkesParams(weighting="TD"))
    assert got == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})


# --- water-fill --------------------------------------------------------------------------------


def test_water_fill_raises_the_heaviest_first() -> None:
    # breakpoints m/w: a .2/.9 = .222, b .3/.1 = 3. Raising a alone: lambda = (1 - .3)/.9 = .778
    # <= 3, so a = .778 * .9 = .7 and b stays at its minimum .3.
    got = fawkes.water_fill({"a": 0.9, "b": 0.1}, {"a": 0.2, "b": 0.3})
    assert got == pytest.approx({"a": 0.7, "b": 0.3})


def test_water_fill_proportional_when_minimums_do_not_bind() -> None:
    got = fawkes.water_fill({"a": 0.25, "b": 0.75}, {"a": 0.1, "b": 0.1})
    assert got == pytest.approx({"a": 0.25, "b": 0.75})


def test_water_fill_zero_weight_stays_at_minimum() -> None:
    got = fawkes.water_fill({"a": 1.0, "b": 0.0, "c": 0.0}, {"b": 0.2, "c": 0.1})
    assert got == pytest.approx({"a": 0.7, "b": 0.2, "c": 0.1})


def test_water_fill_to_a_smaller_pool() -> None:
    assert fawkes.water_fill({"a": 0.5, "b": 0.5}, {}, 0.8) == pytest.approx({"a": 0.4, "b": 0.4})


def test_water_fill_scales_minimums_that_exceed_the_pool() -> None:
    got = fawkes.water_fill({"a": 0.5, "b": 0.5}, {"a": 0.6, "b": 0.6})
    assert got == pytest.approx({"a": 0.5, "b": 0.5})


def test_water_fill_needs_a_positive_weight() -> None:
    with pytest.raises(PolicyError) as info:
        fawkes.water_fill({"a": 0.0}, {})
    assert info.value.field == "weights"


# --- step: discrimination, tau, shares ---------------------------------------------------------


def _td(t: float, a_tasks: float, b_tasks: float, a_used: float, b_used: float) -> FawkesTick:
    return FawkesTick(
        t=t,
        queues={
            "a": QueueSample(running_jobs=1, waiting_tasks=a_tasks, used_fraction=a_used),
            "b": QueueSample(running_jobs=1, waiting_tasks=b_tasks, used_fraction=b_used),
        },
    )


def test_first_tick_admits_water_fills_and_has_zero_discrimination() -> None:
    params = FawkesParams(weighting="TD", tau=10)
    decision, state = fawkes.step(FawkesState(), _td(0, 10, 30, 0.5, 0.5), params)
    assert decision.admitted == ("a", "b")
    assert decision.newly_admitted == ("a", "b")
    assert decision.discrimination == {"a": 0.0, "b": 0.0}
    assert decision.factor == 0.0
    assert decision.rebalanced is False
    # weights 10/40, 30/40; no minimums -> shares equal the weights
    assert decision.shares == pytest.approx({"a": 0.25, "b": 0.75})
    assert "first decision" in decision.reason
    assert state.activated_at == {"a": 0, "b": 0}


@pytest.mark.parametrize(("tau", "rebalanced"), [(10.0, False), (6.25, False), (6.0, True)])
def test_rebalance_only_when_factor_exceeds_tau(tau: float, rebalanced: bool) -> None:
    params = FawkesParams(weighting="TD", tau=tau)
    _, state = fawkes.step(FawkesState(), _td(0, 10, 30, 0.5, 0.5), params)
    # t=10: w = .25, .75; c = .5, .5 -> D_a = (.5 - .25) * 10 = 2.5, D_b = -2.5
    # factor = (2.5^2 + 2.5^2) / 2 = 6.25
    state = FawkesState.from_dict({**state.to_dict(), "shares": {"a": 0.5, "b": 0.5}})
    decision, _ = fawkes.step(state, _td(10, 10, 30, 0.5, 0.5), params)
    assert decision.discrimination == pytest.approx({"a": 2.5, "b": -2.5})
    assert decision.factor == pytest.approx(6.25)
    assert decision.rebalanced is rebalanced
    expected = {"a": 0.25, "b": 0.75} if rebalanced else {"a": 0.5, "b": 0.5}
    assert decision.shares == pytest.approx(expected)


def test_discrimination_integrates_over_uneven_ticks() -> None:
    params = FawkesParams(weighting="TD", tau=1e9)
    state = FawkesState()
    _, state = fawkes.step(state, _td(0, 10, 30, 0.5, 0.5), params)
    _, state = fawkes.step(state, _td(10, 10, 30, 0.5, 0.5), params)  # D_a = .25 * 10 = 2.5
    # t=40: w = 30/40 = .75, .25; c = .2, .8 -> D_a = 2.5 + (.2 - .75) * 30 = -14
    decision, _ = fawkes.step(state, _td(40, 30, 10, 0.2, 0.8), params)
    assert decision.discrimination == pytest.approx({"a": -14.0, "b": 14.0})
    assert decision.factor == pytest.approx(196.0)


# --- admission and deactivation ----------------------------------------------------------------


def _busy(*names: str, used: float = 0.0) -> dict[str, QueueSample]:
    return {q: QueueSample(running_jobs=1, waiting_jobs=1, used_fraction=used) for q in names}


def test_fifo_admission_when_minimums_exceed_one() -> None:
    params = FawkesParams(
        weighting="EQ", tau=1e9, interval_s=60, min_shares=dict.fromkeys(ABC, 0.5)
    )
    d0, s = fawkes.step(FawkesState(), FawkesTick(0, _busy("a", "b", "c")), params)
    # .5 + .5 = 1 fits; c would make 1.5 -> waits
    assert d0.admitted == ("a", "b")
    assert d0.waiting == ("c",)
    assert d0.shares == pytest.approx({"a": 0.5, "b": 0.5, "c": 0.0})
    d1, s = fawkes.step(s, FawkesTick(60, _busy("b", "c")), params)
    # a idle for 60 s: not longer than T, still admitted; c still waits
    assert d1.admitted == ("a", "b")
    assert d1.waiting == ("c",)
    d2, s = fawkes.step(s, FawkesTick(120, _busy("b", "c")), params)
    # a idle for 120 s > T: deactivated, c admitted in its place with D = 0
    assert d2.deactivated == ("a",)
    assert d2.admitted == ("b", "c")
    assert d2.newly_admitted == ("c",)
    assert d2.waiting == ()
    assert d2.discrimination["c"] == 0.0
    assert d2.shares == pytest.approx({"a": 0.0, "b": 0.5, "c": 0.5})


def test_fifo_head_blocks_later_arrivals_that_would_fit() -> None:
    params = FawkesParams(weighting="EQ", min_shares={"a": 0.6, "b": 0.5, "c": 0.3})
    _, s = fawkes.step(FawkesState(), FawkesTick(0, _busy("a")), params)
    # b (.6 + .5 > 1) heads the FIFO; c would fit (.9) but waits behind b (section 4.2.1)
    d, _ = fawkes.step(s, FawkesTick(1, _busy("a", "b", "c")), params)
    assert d.admitted == ("a",)
    assert d.waiting == ("b", "c")


def test_deactivation_after_idle_longer_than_t_returns_the_share() -> None:
    params = FawkesParams(weighting="EQ", tau=1e9, interval_s=60)
    d, s = fawkes.step(FawkesState(), FawkesTick(0, _busy("a", "b")), params)
    assert d.shares == pytest.approx({"a": 0.5, "b": 0.5})
    for t in (30, 60):
        d, s = fawkes.step(s, FawkesTick(t, _busy("b")), params)
        assert d.admitted == ("a", "b")  # 60 - 0 is not longer than T
        assert d.shares == pytest.approx({"a": 0.5, "b": 0.5})
    d, s = fawkes.step(s, FawkesTick(61, _busy("b")), params)
    assert d.deactivated == ("a",)
    assert d.admitted == ("b",)
    assert d.shares == pytest.approx({"a": 0.0, "b": 1.0})
    assert "admitted set changed" in d.reason
    assert "a" not in s.discrimination
    # busy again: admitted anew, its discrimination starts from 0
    d, s = fawkes.step(s, FawkesTick(62, _busy("a", "b")), params)
    assert d.newly_admitted == ("a",)
    assert d.discrimination["a"] == 0.0
    assert s.activated_at["a"] == 62


def test_waiting_queue_idle_longer_than_t_leaves_the_fifo() -> None:
    params = FawkesParams(weighting="EQ", interval_s=60, min_shares={"a": 1.0, "b": 0.5})
    _, s = fawkes.step(FawkesState(), FawkesTick(0, _busy("a", "b")), params)
    assert s.waiting == ("b",)
    d, s = fawkes.step(s, FawkesTick(61, _busy("a")), params)
    assert d.waiting == ()


def test_floors_are_reserved_for_inactive_queues() -> None:
    params = FawkesParams(
        weighting="EQ", min_shares={"a": 0.3, "b": 0.3}, floors={"a": 0.2}, interval_s=60
    )
    d, _ = fawkes.step(FawkesState(), FawkesTick(0, _busy("b")), params)
    # a is inactive and keeps its floor .2; b gets the rest of the pool
    assert d.shares == pytest.approx({"a": 0.2, "b": 0.8})
    assert d.unassigned == pytest.approx(0.0)


def test_none_keeps_minimum_shares() -> None:
    params = FawkesParams(weighting="None", tau=0, min_shares={"a": 0.2, "b": 0.3})
    d, s = fawkes.step(FawkesState(), FawkesTick(0, _busy("a", "b", used=0.5)), params)
    d, _ = fawkes.step(s, FawkesTick(10, _busy("a", "b", used=0.5)), params)
    # D_a = (.5 - .2) * 10 = 3, D_b = (.5 - .3) * 10 = 2 -> factor 6.5 > 0, still no rebalance
    assert d.factor == pytest.approx(6.5)
    assert d.rebalanced is False
    assert d.shares == pytest.approx({"a": 0.2, "b": 0.3})
    assert d.unassigned == pytest.approx(0.5)


def test_raised_minimum_invalidates_kept_shares() -> None:
    low = FawkesParams(weighting="EQ", tau=1e9, min_shares={"a": 0.1, "b": 0.1})
    _, s = fawkes.step(FawkesState(), FawkesTick(0, _busy("a", "b")), low)
    s = FawkesState.from_dict({**s.to_dict(), "shares": {"a": 0.2, "b": 0.8}})
    high = FawkesParams(weighting="EQ", tau=1e9, min_shares={"a": 0.4, "b": 0.1})
    d, _ = fawkes.step(s, FawkesTick(1, _busy("a", "b")), high)
    assert d.shares == pytest.approx({"a": 0.5, "b": 0.5})


# --- state, time, parameters -------------------------------------------------------------------


def test_state_round_trips_through_json() -> None:
    params = FawkesParams(weighting="TD", tau=1, min_shares={"a": 0.1})
    _, s = fawkes.step(FawkesState(), _td(0, 10, 30, 0.5, 0.5), params)
    restored = FawkesState.from_dict(json.loads(json.dumps(s.to_dict())))
    assert restored == s
    nxt = _td(5, 20, 30, 0.3, 0.7)
    assert fawkes.step(restored, nxt, params) == fawkes.step(s, nxt, params)
    json.dumps(fawkes.step(s, nxt, params)[0].to_dict())


def test_time_must_advance() -> None:
    params = FawkesParams()
    _, s = fawkes.step(FawkesState(), _td(10, 1, 1, 0, 0), params)
    with pytest.raises(PolicyError) as info:
        fawkes.step(s, _td(10, 1, 1, 0, 0), params)
    assert info.value.field == "t"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"weighting": "XX"}, "weighting"),
        ({"tau": -1}, "tau"),
        ({"psi": 0.0}, "psi"),
        ({"psi": 1.0}, "psi"),
        ({"a": 1.0}, "a"),
        ({"interval_s": 0}, "interval_s"),
        ({"min_shares": {"q": 1.5}}, "min_shares.q"),
        ({"min_shares": {"q": math.nan}}, "min_shares.q"),
        ({"min_shares": {"q": 0.2}, "floors": {"q": 0.3}}, "floors.q"),
        ({"floors": {"q": 0.1}}, "floors.q"),
        (
            {"min_shares": {"p": 0.6, "q": 0.6}, "floors": {"p": 0.6, "q": 0.6}},
            "floors",
        ),
    ],
)
def test_invalid_parameters_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(PolicyError) as info:
        FawkesParams(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


def test_from_values_uses_registry_defaults_and_rejects_unknown_names() -> None:
    params = FawkesParams.from_values({"weighting": "JD"}, min_shares={"a": 0.1})
    assert (params.tau, params.psi, params.a, params.interval_s) == (10.0, 0.5, 2.0, 60.0)
    with pytest.raises(PolicyError) as info:
        FawkesParams.from_values({"sigma": 1})
    assert info.value.field == "sigma"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"waiting_tasks": -1}, "waiting_tasks"),
        ({"used_fraction": 1.5}, "used_fraction"),
        ({"vcore_utilization": math.inf}, "vcore_utilization"),
        ({"slowdowns": (1.0, -2.0)}, "slowdowns[1]"),
    ],
)
def test_invalid_samples_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(PolicyError) as info:
        QueueSample(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


def test_registry_exports_one_fawkes_spec_with_all_weightings() -> None:
    (spec,) = fawkes.REGISTRY
    assert spec.name == "fawkes"
    assert spec.kind == "queue"
    weighting = next(p for p in spec.params if p.name == "weighting")
    assert weighting.choices == (
        "JD", "DD", "TD", "PU", "DU", "RU", "JS", "JT", "TT", "EQ", "None",
    )  # fmt: skip


@pytest.mark.parametrize("name", ["tau", "psi", "a", "interval_s"])
def test_non_finite_parameters_are_rejected(name: str) -> None:
    with pytest.raises(PolicyError) as info:
        FawkesParams(**{name: math.nan})  # type: ignore[arg-type]
    assert info.value.field == name
