"""Playground scenarios for prism (seed 003 sections 3 to 5; docs/policies.md "Playground
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
from app.policies.prism import scenario as handler

EXAMPLES = Path(__file__).resolve().parents[4] / "examples" / "scenarios"


def _load() -> dict[str, Any]:
    return load_scenario(EXAMPLES / "prism_heartbeat.json")


def test_heartbeat_example_picks_as_computed_by_hand() -> None:
    result = handler.run(_load())
    # node capacity <8, 8192>, free <4, 4096>; A dominant share 4/8 = 0.5, B 1/8 = 0.125;
    # a1 paused 100 - 90 = 10 s.
    # 1: B map   U = (0.375 - 0.25) + (2/0.1 - 2/1)     = 0.125 + 18 = 18.125
    # 2: a1 merge U = (0.25 - 0.375) + 0.1 * 10^2      = -0.125 + 10 = 9.875
    # 3: B map   U = (0.375 - 0.25) + (2/1 - 2/2)       = 0.125 + 1 = 1.125
    # then A's map needs 1024 MB and 0 MB are free: stop
    picks = result["picks"]
    assert [(p["job"], p["task"], p["phase"]) for p in picks] == [
        ("B", None, "map"),
        ("A", "a1", "merge"),
        ("B", None, "map"),
    ]
    assert [p["utility"] for p in picks] == pytest.approx([18.125, 9.875, 1.125])
    assert [p["perf"] for p in picks] == pytest.approx([18, 10, 1])
    assert [p["duration_s"] for p in picks] == [12.0, 5.0, 12.0]
    assert result["free_after"] == {"vcores": 1.0, "memory_mb": 0.0}
    assert result["stop_reason"] == "no candidate phase fits the free resources"
    assert (result["node"], result["now_s"]) == ("n1", 100.0)
    assert json.loads(json.dumps(result)) == result
    assert all(type(v) is float for v in picks[0]["free_after"].values())


def test_table_lists_each_pick_and_the_stop_reason() -> None:
    lines = handler.table(handler.run(_load())).splitlines()
    assert lines[0] == "policy: prism  node: n1  now_s: 100"
    assert lines[1].split() == [
        "step",
        "job",
        "task",
        "phase",
        "vcores",
        "memory_mb",
        "fairness",
        "perf",
        "utility",
        "free_after",
    ]
    assert lines[3].split()[:9] == ["2", "A", "a1", "merge", "1", "2048", "-0.125", "10", "9.875"]
    assert lines[-1] == "stopped: no candidate phase fits the free resources"


def test_parameters_change_the_decision() -> None:
    scenario = _load()
    scenario["alpha"] = 0.0
    # fairness only: B map +0.125 first; then A's phases widen the gap (U <= 0), B map again
    # (B 0.25 -> 0.375, gap 0.25 -> 0.125: +0.125), then B has no pending map: stop
    result = handler.run(scenario)
    assert [(p["job"], p["phase"]) for p in result["picks"]] == [("B", "map"), ("B", "map")]
    assert result["stop_reason"] == "no fitting candidate phase has a positive utility"


def _set(path: list[str], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(scenario: dict[str, Any]) -> None:
        target: Any = scenario
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _drop(path: list[str]) -> Callable[[dict[str, Any]], None]:
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
        (_set(["policy"], "hybridmr"), "policy"),
        (_set(["epsilon"], 2), "epsilon"),
        (_set(["top_k"], 0), "top_k"),
        (_set(["share"], "max"), "share"),
        (_drop(["now_s"]), "now_s"),
        (_drop(["node"]), "node"),
        (_set(["node", "free", "vcores"], -1), "node.free.vcores"),
        (_set(["node", "free", "vcores"], 9), "node.free"),
        (_set(["node", "capacity", "memory_mb"], 0), "node.capacity"),
        (_set(["node", "capacity", "disk"], 1), "node.capacity.disk"),
        (_drop(["jobs", "A", "profile", "merge"]), "jobs.A.profile.merge"),
        (_set(["jobs", "A", "profile", "sort"], {}), "jobs.A.profile.sort"),
        (_set(["jobs", "A", "profile", "map", "vcores"], "one"), "jobs.A.profile.map.vcores"),
        (_set(["jobs", "B", "maps", "pending"], 1.5), "jobs.B.maps.pending"),
        (_set(["jobs", "B", "queue"], "root"), "jobs.B.queue"),
        (_set(["paused", "a1", "job"], "Z"), "paused.a1.job"),
        (_set(["paused", "a1", "next_phase"], "map"), "paused.a1.next_phase"),
        (_set(["paused", "a1", "paused_since_s"], 101), "paused.a1.paused_since_s"),
        (_set(["paused"], []), "paused"),
    ],
)
def test_errors_name_the_field(edit: Callable[[dict[str, Any]], None], field: str) -> None:
    scenario = copy.deepcopy(_load())
    edit(scenario)
    with pytest.raises(PolicyError) as err:
        handler.run(scenario)
    assert err.value.field == field
