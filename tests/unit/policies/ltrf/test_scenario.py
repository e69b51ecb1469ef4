"""``yarn-sidecar policy run`` for ltrf / mlrf (docs/policies.md "Playground scenarios", Table
9.2)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from app.playground import load_scenario, render, run_scenario
from app.policies.base import PolicyError

EXAMPLES = Path(__file__).resolve().parents[4] / "examples" / "scenarios"

# Table 9.2 (docs/policies.md): per round (alloc A, alloc B, counted A, counted B), then totals.
EXPECTED = {
    "mlrf_table_9_2.json": (
        [(20, 80, 20, 80), (40, 60, 40, 60), (50, 50, 50, 50), (50, 50, 50, 50)],
        (160, 240, 160, 240),
    ),
    "ltrf_table_9_2.json": (
        [(20, 80, 20, 80), (40, 60, 40, 60), (80, 20, 80, 20), (60, 40, 60, 40)],
        (200, 200, 200, 200),
    ),
    "ltrf_table_9_2_discount.json": (
        [(20, 80, 20, 65), (40, 60, 40, 55), (80, 20, 65, 20), (60, 40, 55, 40)],
        (200, 200, 180, 180),
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_table_9_2_through_the_playground(name: str) -> None:
    scenario = load_scenario(EXAMPLES / name)
    result = run_scenario(scenario)
    rounds, (alloc_a, alloc_b, counted_a, counted_b) = EXPECTED[name]
    assert len(result["rounds"]) == 4
    for item, (a, b, ca, cb) in zip(result["rounds"], rounds, strict=True):
        assert item["alloc"] == pytest.approx({"A": a, "B": b}, abs=1e-9)
        assert item["counted"] == pytest.approx({"A": ca, "B": cb}, abs=1e-9)
        assert {"alloc", "counted", "total_counted", "debt"} <= set(item)
    assert result["rounds"][-1]["total_counted"] == pytest.approx({"A": counted_a, "B": counted_b})
    assert result["totals"]["alloc"] == pytest.approx({"A": alloc_a, "B": alloc_b})
    assert result["totals"]["counted"] == pytest.approx({"A": counted_a, "B": counted_b})
    # the public JSON is plain floats and survives a round trip
    text = render(scenario, result, "json")
    assert json.loads(text) == result
    assert all(type(v) is float for v in result["rounds"][0]["alloc"].values())


def test_table_format_lists_every_round_and_the_totals() -> None:
    scenario = load_scenario(EXAMPLES / "ltrf_table_9_2_discount.json")
    text = render(scenario, run_scenario(scenario), "table")
    lines = text.splitlines()
    assert lines[0] == "policy: ltrf"
    assert lines[1].split() == [
        "round",
        "queue",
        "demand",
        "alloc",
        "counted",
        "total_counted",
        "debt",
    ]
    assert lines[3].split() == ["t1", "B", "100", "80", "65", "65", "-30"]
    assert lines[-1].split() == ["total", "B", "200", "180", "0"]


def _base() -> dict[str, Any]:
    return load_scenario(EXAMPLES / "ltrf_table_9_2.json")


def _with(path: list[Any], value: Any) -> dict[str, Any]:
    scenario = copy.deepcopy(_base())
    target: Any = scenario
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return scenario


@pytest.mark.parametrize(
    ("scenario", "field"),
    [
        (_with(["colour"], "red"), "colour"),
        (_with(["capacity"], -1), "capacity"),
        (_with(["capacity"], "100"), "capacity"),
        (_with(["discount"], 0), "discount"),
        (_with(["discount"], 2), "discount"),
        (_with(["queues"], {}), "queues"),
        (_with(["queues", "A", "weight"], 0), "queues.A.weight"),
        (_with(["queues", "A", "share"], 1), "queues.A.share"),
        (_with(["queues", "A"], 1), "queues.A"),
        (_with(["rounds"], {}), "rounds"),
        (_with(["rounds", 2], {"new_demand": {"A": 1}, "extra": 1}), "rounds[2].extra"),
        (_with(["rounds", 2], {}), "rounds[2].new_demand"),
        (_with(["rounds", 2, "new_demand", "C"], 5), "rounds[2].new_demand.C"),
        (_with(["rounds", 1, "new_demand", "A"], -3), "rounds[1].new_demand.A"),
        (_with(["rounds", 1, "new_demand", "A"], None), "rounds[1].new_demand.A"),
    ],
)
def test_validation_errors_name_the_field(scenario: dict[str, Any], field: str) -> None:
    with pytest.raises(PolicyError) as info:
        run_scenario(scenario)
    assert info.value.field == field


def test_missing_capacity_and_rounds_are_named() -> None:
    for key in ("capacity", "rounds", "queues"):
        scenario = _base()
        del scenario[key]
        with pytest.raises(PolicyError) as info:
            run_scenario(scenario)
        assert info.value.field == key


def test_defaults_weight_one_and_missing_queue_has_no_new_demand() -> None:
    scenario = {
        "policy": "mlrf",
        "capacity": 10,
        "queues": {"A": {}, "B": {"weight": 1}},
        "rounds": [{"new_demand": {"A": 30}}],
    }
    result = run_scenario(scenario)
    assert result["rounds"][0]["alloc"] == {"A": 10.0, "B": 0.0}
