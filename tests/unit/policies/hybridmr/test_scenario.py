"""Playground scenarios for hybridmr (seed 001 section III; docs/policies.md "Playground
scenarios")."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.playground import load_scenario
from app.policies.base import PolicyError
from app.policies.hybridmr import scenario as handler

EXAMPLES = Path(__file__).resolve().parents[4] / "examples" / "scenarios"


def _load(name: str) -> dict[str, Any]:
    return load_scenario(EXAMPLES / name)


def test_placement_example_estimates_and_places_as_computed_by_hand() -> None:
    result = handler.run(_load("hybridmr_placement.json"))
    # profiles (virtual): 10 GB/8 -> 100 s, 20 GB/8 -> 180 s, 10 GB/16 -> 80 s (map 30, red. 45)
    # 10 GB/8 exact 100; 15 GB/8 100 + 80/2 = 140; 40 GB/8 180 + 2 * 80 = 340;
    # 10 GB/12: map 60 - 30 * 2/3 = 40 + reduce 40 + 5/2 = 82.5; 10 GB/32: 30 * 16/32 + 45 = 60;
    # 5 GB/4: at 8 nodes map 35, reduce 25 -> 35 * 8/4 + 25 = 95; grep: none
    totals = [e["total_s"] for e in result["estimates"]]
    assert totals == pytest.approx([100, 140, 340, 82.5, 60, 95, None])
    assert [e["rule"] for e in result["estimates"]] == [
        "exact",
        "data_size",
        "data_size",
        "cluster_size",
        "cluster_size",
        "data_then_cluster",
        None,
    ]
    # Algorithm 2 with the 140 s virtual estimate: 200 -> virtual; 120 and 140 -> native;
    # the transactional job -> virtual; grep has no profile -> unknown_placement (native)
    assert result["virtual"] == ["j1", "web"]
    assert result["native"] == ["j2", "j3", "j5"]
    j3 = result["placements"][2]
    assert (j3["desired_s"], j3["estimated_s"], j3["native_estimated_s"]) == pytest.approx(
        (140, 140, 127.5)
    )
    assert result["arbitration"] is None
    assert json.loads(json.dumps(result)) == result
    assert all(type(e["total_s"]) is float for e in result["estimates"][:-1])


def test_interference_example_moves_then_pauses() -> None:
    result = handler.run(_load("hybridmr_interference.json"))
    arb = result["arbitration"]
    assert [v["app"] for v in arb["violations"]] == ["rubis"]
    assert arb["violations"][0]["excess"] == pytest.approx(0.5)
    # least interfering first: t2 -> vm2 (tie with vm3 at 0 left, by id), t1 -> vm3, t4 paused
    assert [(a["action"], a["task"], a["to"]) for a in arb["actions"]] == [
        ("move", "t2", "vm2"),
        ("move", "t1", "vm3"),
        ("throttle", "t4", None),
    ]
    assert arb["free_after"] == pytest.approx({"vm1": 3.0, "vm2": 0.0, "vm3": 1.0})
    assert result["placements"] == [] and result["estimates"] == []


def test_table_renders_every_section() -> None:
    text = handler.table(handler.run(_load("hybridmr_placement.json")))
    assert text.splitlines()[0] == "policy: hybridmr"
    assert "estimates (Algorithm 1)" in text and "placements (Algorithm 2)" in text
    assert "data_then_cluster" in text
    row = next(line for line in text.splitlines() if line.startswith("j2 "))
    assert row.split()[:6] == ["j2", "batch", "native", "120", "140", "127.5"]
    arb = handler.table(handler.run(_load("hybridmr_interference.json")))
    assert "violation rubis on vm1: 2.5 > sla 2" in arb
    assert "throttle t4 (j2)" in arb


def _set(path: list[str | int], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(scenario: dict[str, Any]) -> None:
        target: Any = scenario
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _drop(path: list[str | int]) -> Callable[[dict[str, Any]], None]:
    def edit(scenario: dict[str, Any]) -> None:
        target: Any = scenario
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return edit


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (_set(["bogus"], 1), "bogus"),
        (_set(["policy"], "prism"), "policy"),
        (_set(["throttle_share"], 2), "throttle_share"),
        (_set(["unknown_placement"], "cloud"), "unknown_placement"),
        (_set(["profiles", 1, "map_s"], -5), "profiles[1].map_s"),
        (_set(["profiles", 0, "partition"], "physical"), "profiles[0].partition"),
        (_set(["profiles", 2, "color"], "red"), "profiles[2].color"),
        (_drop(["profiles", 3, "total_s"]), "profiles[3].total_s"),
        (_drop(["profiles"]), "profiles"),
        (_set(["partitions", "virtual"], 0), "partitions.virtual"),
        (_drop(["partitions"]), "partitions"),
        (_set(["estimates", 0, "partition"], "physical"), "estimates[0].partition"),
        (_set(["estimates", 1, "input_bytes"], "big"), "estimates[1].input_bytes"),
        (_drop(["jobs", 0, "desired_s"]), "jobs[0].desired_s"),
        (_set(["jobs", 1, "workload"], "interactive"), "jobs[1].workload"),
        (_set(["jobs", 1, "id"], "j1"), "jobs[1].id"),
        (_set(["jobs"], {}), "jobs"),
    ],
)
def test_placement_errors_name_the_field(
    edit: Callable[[dict[str, Any]], None], field: str
) -> None:
    scenario = copy.deepcopy(_load("hybridmr_placement.json"))
    edit(scenario)
    with pytest.raises(PolicyError) as err:
        handler.run(scenario)
    assert err.value.field == field


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (_set(["interference", "links"], {}), "interference.links"),
        (_set(["interference", "nodes", "vm1", "capacity"], -1), "interference.nodes.vm1.capacity"),
        (
            _set(["interference", "interactive", "rubis", "sla"], 0),
            "interference.interactive.rubis.sla",
        ),
        (_set(["interference", "tasks", "t1", "node"], "vm9"), "interference.tasks.t1.node"),
        (_drop(["interference", "tasks", "t2", "vcores"]), "interference.tasks.t2.vcores"),
        (_set(["interference", "tasks", "t3", "cpu"], 1), "interference.tasks.t3.cpu"),
    ],
)
def test_interference_errors_name_the_field(
    edit: Callable[[dict[str, Any]], None], field: str
) -> None:
    scenario = copy.deepcopy(_load("hybridmr_interference.json"))
    edit(scenario)
    with pytest.raises(PolicyError) as err:
        handler.run(scenario)
    assert err.value.field == field
