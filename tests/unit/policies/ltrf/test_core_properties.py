"""LTRF / MLRF invariants under random inputs (hypothesis)."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from app.policies.ltrf import core as ltrf
from app.policies.ltrf.core import LtrfParams, LtrfState

NAMES = ("q0", "q1", "q2", "q3", "q4", "q5", "q6")
TOL = 1e-6

_weights = st.dictionaries(st.sampled_from(NAMES), st.floats(0.1, 10, allow_nan=False), min_size=1)
_amount = st.floats(0, 200, allow_nan=False)
_params = st.one_of(
    st.just(LtrfParams(memoryless=True)),
    st.floats(0.05, 1.0).map(lambda d: LtrfParams(discount=d)),
)


@st.composite
def _rounds(draw: st.DrawFn) -> tuple[dict[str, float], list[dict[str, float]], float]:
    weights = draw(_weights)
    names = sorted(weights)
    rounds = draw(
        st.lists(st.dictionaries(st.sampled_from(names), _amount), min_size=1, max_size=8)
    )
    # Zero, or at least a thousandth of a unit: below that an absolute tolerance of 1e-6 can no
    # longer tell a tiny but correct share from none (YARN resources are whole vcores and MB).
    capacity = draw(st.one_of(st.just(0.0), st.floats(1e-3, 300, allow_nan=False)))
    return weights, rounds, capacity


def _level(u: float, counted: float, w: float) -> float:
    return (u + counted) / w


@settings(max_examples=300, deadline=None)
@given(data=_rounds(), params=_params)
def test_rounds_are_bounded_work_conserving_water_fills(
    data: tuple[dict[str, float], list[dict[str, float]], float], params: LtrfParams
) -> None:
    weights, rounds, capacity = data
    state = LtrfState()
    for new_demand in rounds:
        before = {} if params.memoryless else dict(state.counted)
        result, state = ltrf.round(state, new_demand, capacity, weights, params)
        demand, alloc = result.demand, result.alloc
        for q in weights:
            assert -TOL <= alloc[q] <= demand[q] + TOL  # never above demand
        # work-conserving: everything up to the capacity is handed out
        assert abs(sum(alloc.values()) - min(capacity, sum(demand.values()))) <= TOL * max(
            1.0, capacity
        )
        _assert_water_level(weights, before, demand, result)


def _assert_water_level(
    weights: dict[str, float],
    before: Mapping[str, float],
    demand: Mapping[str, float],
    result: ltrf.RoundResult,
) -> None:
    """Queues cut short by the capacity end on one common level; nobody below it is left unserved
    and nobody served ends above it (the defining property of the water-fill)."""
    alloc, counted = result.alloc, result.counted
    final = {q: _level(before.get(q, 0.0), counted[q], weights[q]) for q in weights}
    short = [q for q in weights if alloc[q] < demand[q] - TOL]
    cut = [q for q in short if alloc[q] > TOL]  # served, but not up to their demand
    if not cut:
        return
    level = max(final[q] for q in cut)
    scale = max(1.0, level)
    for q in cut:
        assert abs(final[q] - level) <= 1e-6 * scale
    for q in short:
        if alloc[q] <= TOL:  # left unserved: it already stood at or above the level
            assert before.get(q, 0.0) / weights[q] >= level - 1e-6 * scale
    for q in weights:
        if alloc[q] > TOL:
            assert final[q] <= level + 1e-6 * scale


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(2, 6),
    warmup=st.lists(
        st.lists(st.floats(0, 100, allow_nan=False), min_size=6, max_size=6), max_size=4
    ),
    discount=st.floats(0.1, 1.0),
)
def test_equal_backlogged_queues_converge_to_equal_usage(
    n: int, warmup: list[list[float]], discount: float
) -> None:
    capacity = 100.0
    weights = {f"q{i}": 1.0 for i in range(n)}
    params = LtrfParams(discount=discount)
    state = LtrfState()
    # warm-up: uneven demand (some queues idle) builds uneven histories
    for row in warmup:
        _, state = ltrf.round(state, {f"q{i}": row[i] for i in range(n)}, capacity, weights, params)
    # then everybody is backlogged for longer than it takes to close the gap
    for _ in range(n * len(warmup) + 2):
        backlog = {q: 10 * capacity for q in weights}
        _, state = ltrf.round(state, backlog, capacity, weights, params)
    counted = [state.counted[q] for q in weights]
    assert max(counted) - min(counted) <= 1e-6 * max(1.0, max(counted))
    if discount == 1.0:
        totals = [state.total_alloc[q] for q in weights]
        assert max(totals) - min(totals) <= 1e-6 * max(1.0, max(totals))


@settings(max_examples=100, deadline=None)
@given(n=st.integers(2, 6), rounds=st.integers(1, 10))
def test_equal_backlogged_queues_without_discount_get_equal_allocations(
    n: int, rounds: int
) -> None:
    weights = {f"q{i}": 1.0 for i in range(n)}
    state = LtrfState(counted={"q0": 250.0})  # q0 starts ahead
    for _ in range(rounds + 3 * n):
        _, state = ltrf.round(state, {q: 1000.0 for q in weights}, 100, weights, LtrfParams())
    totals = [state.counted[q] for q in weights]
    assert max(totals) - min(totals) <= 1e-6 * max(totals)
