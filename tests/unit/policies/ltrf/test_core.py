"""LTRF / MLRF rounds, ledger and live helpers (seed 002 sec. 9.4, Table 9.2; docs/policies.md)."""

from __future__ import annotations

import json
import math

import pytest

from app.policies.base import PolicyError
from app.policies.ltrf import core as ltrf
from app.policies.ltrf.core import LtrfParams, LtrfState

NEW_A = (20, 40, 80, 60)
NEW_B = (100, 60, 50, 50)
EQUAL = {"A": 1.0, "B": 1.0}

# Table 9.2 as docs/policies.md states it: (alloc A, alloc B, counted A, counted B) per round.
TABLE_9_2 = {
    "mlrf": [(20, 80, 20, 80), (40, 60, 40, 60), (50, 50, 50, 50), (50, 50, 50, 50)],
    "ltrf": [(20, 80, 20, 80), (40, 60, 40, 60), (80, 20, 80, 20), (60, 40, 60, 40)],
    "ltrf_discount": [(20, 80, 20, 65), (40, 60, 40, 55), (80, 20, 65, 20), (60, 40, 55, 40)],
}
PARAMS = {
    "mlrf": LtrfParams(memoryless=True),
    "ltrf": LtrfParams(),
    "ltrf_discount": LtrfParams(discount=0.5),
}
# totals: (alloc A, alloc B, counted A, counted B)
TOTALS = {
    "mlrf": (160, 240, 160, 240),
    "ltrf": (200, 200, 200, 200),
    "ltrf_discount": (200, 200, 180, 180),
}


def _play(params: LtrfParams) -> tuple[list[ltrf.RoundResult], LtrfState]:
    state, results = LtrfState(), []
    for a, b in zip(NEW_A, NEW_B, strict=True):
        result, state = ltrf.round(state, {"A": a, "B": b}, 100, EQUAL, params)
        results.append(result)
    return results, state


@pytest.mark.parametrize("mode", sorted(TABLE_9_2))
def test_table_9_2_every_round(mode: str) -> None:
    results, state = _play(PARAMS[mode])
    for result, (alloc_a, alloc_b, counted_a, counted_b) in zip(
        results, TABLE_9_2[mode], strict=True
    ):
        assert result.alloc == pytest.approx({"A": alloc_a, "B": alloc_b}, abs=1e-9)
        assert result.counted == pytest.approx({"A": counted_a, "B": counted_b}, abs=1e-9)
    alloc_a, alloc_b, counted_a, counted_b = TOTALS[mode]
    assert state.total_alloc == pytest.approx({"A": alloc_a, "B": alloc_b}, abs=1e-9)
    assert state.counted == pytest.approx({"A": counted_a, "B": counted_b}, abs=1e-9)
    assert results[-1].total_counted == pytest.approx({"A": counted_a, "B": counted_b}, abs=1e-9)


@pytest.mark.parametrize(
    ("mode", "demand_a", "demand_b"),
    [
        # Table 9.2 (a) / (b) "Total" demand: new + carried (demand - alloc of the round before)
        ("mlrf", (20, 40, 80, 90), (100, 80, 70, 70)),
        ("ltrf", (20, 40, 80, 60), (100, 80, 70, 100)),
    ],
)
def test_demand_carries_over(
    mode: str, demand_a: tuple[int, ...], demand_b: tuple[int, ...]
) -> None:
    results, _ = _play(PARAMS[mode])
    assert [r.demand["A"] for r in results] == pytest.approx(demand_a)
    assert [r.demand["B"] for r in results] == pytest.approx(demand_b)


def test_debt_ledger() -> None:
    # e = 50 each round; debt_A = sum(50 - alloc_A): 30, 30+10, 40-30, 10-10
    results, state = _play(PARAMS["ltrf"])
    assert [r.debt["A"] for r in results] == pytest.approx([30, 40, 10, 0])
    assert [r.debt["B"] for r in results] == pytest.approx([-30, -40, -10, 0])
    assert [r.entitlement["A"] for r in results] == pytest.approx([50, 50, 50, 50])
    assert state.debt == pytest.approx({"A": 0, "B": 0})


def test_weighted_mlrf() -> None:
    # weights 2 : 1, both want 100 of 90: equal alloc/w -> 2L + L = 90, L = 30: A 60, B 30
    result, _ = ltrf.round(LtrfState(), {"A": 100, "B": 100}, 90, {"A": 2, "B": 1}, LtrfParams())
    assert result.alloc == pytest.approx({"A": 60, "B": 30})
    assert result.entitlement == pytest.approx({"A": 60, "B": 30})


def test_history_raises_the_lower_queue_first_then_ties_advance_together() -> None:
    # u_A = 30, u_B = 0: B alone rises to 30 (30 units), the remaining 70 split 35 / 35
    state = LtrfState(counted={"A": 30.0, "B": 0.0})
    result, _ = ltrf.round(state, {"A": 100, "B": 100}, 100, EQUAL, LtrfParams())
    assert result.alloc == pytest.approx({"A": 35, "B": 65})


def test_discounted_tie_gives_the_borrower_more_units_per_level() -> None:
    # Table 9.2 (c), t3: u_A = 60, u_B = 120, demand A 80, B 70, e = 50, delta = .5.
    # A alone: 50 units (u 110) + 20 units at .5 (u 120); tie at 120 with 30 left: A rises .5 per
    # unit, B 1 per unit -> A's last 10 units and 5 of B's lift both to 125; B takes the last 15.
    state = LtrfState(counted={"A": 60.0, "B": 120.0}, demand={"A": 0.0, "B": 20.0})
    result, _ = ltrf.round(state, {"A": 80, "B": 50}, 100, EQUAL, LtrfParams(discount=0.5))
    assert result.alloc == pytest.approx({"A": 80, "B": 20})
    assert result.counted == pytest.approx({"A": 65, "B": 20})


def test_entitlement_only_for_queues_with_demand_or_usage() -> None:
    weights = {"A": 1.0, "B": 1.0, "C": 2.0}
    result, state = ltrf.round(LtrfState(), {"A": 10, "B": 100}, 100, weights, LtrfParams())
    assert result.entitlement == pytest.approx({"A": 50, "B": 50, "C": 0})
    assert result.alloc == pytest.approx({"A": 10, "B": 90, "C": 0})
    # A has usage now: still entitled (and lending) while idle; C still has neither
    result, _ = ltrf.round(state, {"B": 10}, 100, weights, LtrfParams())
    assert result.entitlement == pytest.approx({"A": 50, "B": 50, "C": 0})
    assert result.debt["A"] == pytest.approx(40 + 50)


def test_capacity_zero_carries_all_demand() -> None:
    result, state = ltrf.round(LtrfState(), {"A": 5, "B": 7}, 0, EQUAL, LtrfParams())
    assert result.alloc == {"A": 0.0, "B": 0.0}
    assert state.demand == {"A": 5.0, "B": 7.0}


def test_queues_outside_weights_are_carried_unchanged() -> None:
    state = LtrfState(counted={"X": 9.0}, demand={"X": 3.0}, debt={"X": -1.0})
    result, new = ltrf.round(state, {"A": 5}, 10, EQUAL, LtrfParams())
    assert (new.counted["X"], new.demand["X"], new.debt["X"]) == (9.0, 3.0, -1.0)
    assert "X" not in result.alloc


@pytest.mark.parametrize(
    ("new_demand", "capacity", "weights", "field"),
    [
        ({"A": -1}, 100, EQUAL, "new_demand.A"),
        ({"A": math.nan}, 100, EQUAL, "new_demand.A"),
        ({"Z": 1}, 100, EQUAL, "new_demand.Z"),
        ({"A": 1}, -5, EQUAL, "capacity"),
        ({"A": 1}, math.inf, EQUAL, "capacity"),
        ({"A": 1}, 100, {"A": 0.0, "B": 1.0}, "weights.A"),
        ({"A": 1}, 100, {}, "weights"),
    ],
)
def test_invalid_round_input_names_the_field(
    new_demand: dict[str, float], capacity: float, weights: dict[str, float], field: str
) -> None:
    with pytest.raises(PolicyError) as info:
        ltrf.round(LtrfState(), new_demand, capacity, weights, LtrfParams())
    assert info.value.field == field


@pytest.mark.parametrize("discount", [0.0, -0.5, 1.5, math.nan])
def test_discount_must_be_in_zero_one(discount: float) -> None:
    with pytest.raises(PolicyError) as info:
        LtrfParams(discount=discount)
    assert info.value.field == "discount"


def test_state_round_trips_through_json() -> None:
    _, state = _play(PARAMS["ltrf_discount"])
    restored = LtrfState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert restored == state
    assert restored.rounds == 4


# --- live controller helpers -------------------------------------------------------------------


def test_account_usage_integrates_measurements() -> None:
    # 10 s at A 80 / B 20 vcores with e = 50 each, delta .5:
    # counted A = 10 * (50 + .5 * 30) = 650, B = 10 * 20 = 200; debt A = 10 * (50 - 80) = -300
    state = ltrf.account_usage(LtrfState(), {"A": 80, "B": 20}, {"A": 50, "B": 50}, 10, 0.5)
    assert state.counted == pytest.approx({"A": 650, "B": 200})
    assert state.debt == pytest.approx({"A": -300, "B": 300})
    assert state.total_alloc == pytest.approx({"A": 800, "B": 200})
    # an entitled queue that used nothing lends its whole entitlement
    state = ltrf.account_usage(state, {"A": 10}, {"A": 50, "B": 50}, 2, 0.5)
    assert state.debt["B"] == pytest.approx(300 + 100)


@pytest.mark.parametrize(
    ("used", "entitlement", "dt", "discount", "field"),
    [
        ({"A": -1}, {}, 1, 1.0, "used.A"),
        ({}, {"A": -1}, 1, 1.0, "entitlement.A"),
        ({}, {}, -1, 1.0, "dt_s"),
        ({}, {}, 1, 0.0, "discount"),
    ],
)
def test_account_usage_validates(
    used: dict[str, float], entitlement: dict[str, float], dt: float, discount: float, field: str
) -> None:
    with pytest.raises(PolicyError) as info:
        ltrf.account_usage(LtrfState(), used, entitlement, dt, discount)
    assert info.value.field == field


def test_allocate_with_a_horizon_compares_resource_seconds() -> None:
    # u_A = 100 vcore-s, u_B = 0; an allocation held 10 s counts 10x: B alone needs 10 units to
    # reach A's level, then the remaining 90 split 45 / 45.
    alloc = ltrf.allocate(
        {"A": 100.0}, {"A": 100, "B": 100}, 100, EQUAL, {"A": 50, "B": 50}, horizon_s=10
    )
    assert alloc == pytest.approx({"A": 45, "B": 55})


def test_shares_from_alloc_spreads_the_rest_by_weight() -> None:
    # 50 of 100 unallocated: A .3 + .5 * 1/4 = .425, B .2 + .5 * 3/4 = .575
    shares = ltrf.shares_from_alloc({"A": 30, "B": 20}, {"A": 1, "B": 3}, 100)
    assert shares == pytest.approx({"A": 0.425, "B": 0.575})
    assert sum(shares.values()) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("alloc", "weights", "capacity", "field"),
    [
        ({"A": 10}, EQUAL, 0, "capacity"),
        ({"Z": 10}, EQUAL, 100, "alloc.Z"),
        ({"A": 80, "B": 30}, EQUAL, 100, "alloc"),
        ({"A": 10}, {"A": 0.0}, 100, "weights.A"),
    ],
)
def test_shares_from_alloc_validates(
    alloc: dict[str, float], weights: dict[str, float], capacity: float, field: str
) -> None:
    with pytest.raises(PolicyError) as info:
        ltrf.shares_from_alloc(alloc, weights, capacity)
    assert info.value.field == field


def test_registry_names() -> None:
    assert [s.name for s in ltrf.REGISTRY] == ["ltrf", "mlrf"]
    assert ltrf.REGISTRY[0].defaults() == {"discount": 1.0, "lending": "used"}
