"""Fawkes invariants under random inputs (hypothesis): shares sum to the pool, minimums hold."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from app.policies.fawkes import core as fawkes
from app.policies.fawkes.core import FawkesParams, FawkesState, FawkesTick, QueueSample

NAMES = ("q0", "q1", "q2", "q3", "q4", "q5")
WEIGHTINGS = tuple(w for w in fawkes.WEIGHTINGS if w != "None")

_count = st.floats(0, 50, allow_nan=False)
_fraction = st.floats(0, 1, allow_nan=False)
_sample = st.builds(
    QueueSample,
    waiting_jobs=_count,
    waiting_tasks=_count,
    waiting_input_bytes=st.floats(0, 1e12, allow_nan=False),
    running_jobs=_count,
    used_fraction=_fraction,
    vcore_utilization=_fraction,
    memory_utilization=_fraction,
    completed_jobs=_count,
    completed_tasks=_count,
    slowdowns=st.lists(st.floats(0, 20, allow_nan=False), max_size=3).map(tuple),
)
_ticks = st.lists(
    st.tuples(
        st.floats(1, 120, allow_nan=False),  # gap to the previous tick
        st.dictionaries(st.sampled_from(NAMES), _sample, max_size=len(NAMES)),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(
    weighting=st.sampled_from(WEIGHTINGS),
    tau=st.sampled_from((0.0, 1.0, 100.0)),
    mins=st.dictionaries(st.sampled_from(NAMES), st.floats(0, 0.6, allow_nan=False)),
    ticks=_ticks,
)
def test_shares_sum_to_one_and_respect_minimums(
    weighting: str,
    tau: float,
    mins: dict[str, float],
    ticks: list[tuple[float, dict[str, QueueSample]]],
) -> None:
    params = FawkesParams(weighting=weighting, tau=tau, interval_s=60, min_shares=mins)
    state, t = FawkesState(), 0.0
    for gap, samples in ticks:
        t += gap
        decision, state = fawkes.step(state, FawkesTick(t, samples), params)
        admitted = decision.admitted
        assert sum(params.min_share(q) for q in admitted) <= 1 + 1e-9
        if admitted:
            assert abs(sum(decision.shares[q] for q in admitted) - 1.0) <= 1e-9
            assert abs(sum(decision.weights.values()) - 1.0) <= 1e-9
        for q in admitted:
            assert decision.shares[q] >= params.min_share(q) - 1e-12
        for q, share in decision.shares.items():
            if q not in admitted:
                assert share == 0.0
        assert decision.rebalanced == (decision.factor > tau)
        assert set(decision.admitted).isdisjoint(decision.waiting)


@settings(max_examples=300, deadline=None)
@given(
    raw=st.dictionaries(
        st.sampled_from(NAMES),
        st.tuples(st.floats(0, 10, allow_nan=False), st.floats(0, 1, allow_nan=False)),
        min_size=1,
    )
)
def test_water_fill_has_the_max_form(raw: dict[str, tuple[float, float]]) -> None:
    total_w = sum(w for w, _ in raw.values())
    weights = {q: (w / total_w if total_w > 0 else 1 / len(raw)) for q, (w, _) in raw.items()}
    total_m = sum(m for _, m in raw.values())
    mins = {q: m / max(total_m, 1.0) * 0.95 for q, (_, m) in raw.items()}
    shares = fawkes.water_fill(weights, mins)
    assert abs(sum(shares.values()) - 1.0) <= 1e-9
    raised = [q for q in shares if shares[q] > mins[q] + 1e-12]
    assert raised  # the minimums sum below 1, so somebody is above theirs
    lam = shares[raised[0]] / weights[raised[0]]
    for q, s in shares.items():
        # s_i = max(m_i, lambda * w_i) with one lambda for everyone
        assert abs(s - max(mins[q], lam * weights[q])) <= 1e-9
