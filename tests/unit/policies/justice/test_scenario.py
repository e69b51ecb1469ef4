"""Justice / PYTHIA playground: the example sequences replayed, computed by hand, and validation."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from app.playground import render, run_scenario
from app.policies.base import PolicyError

SCENARIOS = Path(__file__).resolve().parents[4] / "examples" / "scenarios"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SCENARIOS / name).read_text())
    return data


def acts(event: dict[str, Any]) -> list[tuple[str, str, int]]:
    return [(d["id"], d["action"], d["cpus"]) for d in event["decisions"]]


def test_justice_sequence_by_hand() -> None:
    ev = run_scenario(load("justice_sequence.json"))["events"]
    # 0: bootstrap (no completion yet): j1 gets maxCpus = min(10, 100) = 10, j2 20.
    assert acts(ev[0]) == [("j1", "admit", 10)]
    assert acts(ev[1]) == [("j2", "admit", 20)]
    assert ev[1]["estimator"]["fraction"] is None
    # 2: j1 done at 50 (met): 400/100 = 4 CPUs of 10 -> rate 0.4, last 10/10 = 1. One completion:
    # still bootstrapping.
    assert ev[2]["estimator"] == pytest.approx(
        {"min": 0.4, "max": 0.4, "last": 1.0, "fraction": None}
    )
    # 3: j2 done at 100 (met): 1000/200 = 5 of 20 -> 0.25. (1 + 0.25)/2 = 0.625, mean error
    # (-0.6 - 0.75)/2 = -0.675 -> -0.05, clamped to MinCPUFrac 0.25.
    assert ev[3]["estimator"] == pytest.approx(
        {"min": 0.25, "max": 0.4, "last": 1.0, "fraction": 0.25}
    )
    # 4: j3, 40 tasks: ceil(0.25 * 40) = 10, priority 10/100.
    assert acts(ev[4]) == [("j3", "admit", 10)]
    assert ev[4]["decisions"][0]["priority"] == pytest.approx(0.1)
    # 5: j3 done at 250, missed (150 s > 100 s): 3600/100 = 36 of 40 -> 0.9, last 10/40 = 0.25,
    # error 0.65. (0.25 + 0.9)/2 = 0.575; mean error -0.7/3 -> 41/120 = 0.3417: the miss raised it.
    assert ev[5]["estimator"]["fraction"] == pytest.approx(41 / 120)
    assert ev[5]["estimator"]["fraction"] > ev[4]["estimator"]["fraction"]
    # 6, 7: ceil(0.34167 * 100) = 35 each; free 100 -> 65 -> 30.
    assert acts(ev[6]) == [("j4", "admit", 35)]
    assert acts(ev[7]) == [("j5", "admit", 35)]
    assert ev[7]["free_cpus"] == 30
    # 8-10: 35 > 30 free: queued, ordered by priority 35/500 < 35/105 < 35/50.
    assert acts(ev[10]) == [("j6", "queue", 0), ("j8", "queue", 0), ("j7", "queue", 0)]
    # 11: j5 done at 410 (met): 4000/400 = 10 of 100 -> 0.1, last 0.35, error -0.25.
    # (0.35 + 0.1)/2 = 0.225, mean error -0.95/4 = -0.2375 -> clamped to MinCPUFrac 0.1.
    # j7: 50 - 100 < 0 -> dropped. j8: ttd 5, 0.1 * 105/5 = 2.1 -> 210 > 100 -> dropped.
    # j6: queued 100 s: 0.1 * 500/400 = 0.125 -> ceil(12.5) = 13 (not 10): admitted.
    last = ev[11]
    assert last["estimator"] == pytest.approx(
        {"min": 0.1, "max": 0.9, "last": 0.35, "fraction": 0.1}
    )
    assert acts(last) == [("j7", "drop", 0), ("j8", "drop", 0), ("j6", "admit", 13)]
    j8, j6 = last["decisions"][1], last["decisions"][2]
    assert (j8["req_cpus"], j8["fraction"], j8["ttd_s"]) == pytest.approx((210, 2.1, 5))
    assert (j6["fraction"], j6["ttd_s"], j6["priority"]) == pytest.approx((0.125, 400, 13 / 400))
    assert last["free_cpus"] == 100 - 35 - 13


def test_pythia_sequence_by_hand() -> None:
    ev = run_scenario(load("pythia_sequence.json"))["events"]
    # CPUFrac = max(0.4, 0.25) = 0.4 after two completions, no correction.
    assert ev[3]["estimator"]["fraction"] == pytest.approx(0.4)
    # p3: ceil(0.4 * 40) = 16; p4: maxCpus min(200, 100) = 100 -> 40; p5 40; p6 ceil(4) = 4.
    assert [acts(e) for e in ev[4:8]] == [
        [("p3", "admit", 16)],
        [("p4", "admit", 40)],
        [("p5", "admit", 40)],
        [("p6", "admit", 4)],
    ]
    assert ev[7]["free_cpus"] == 0
    # p3 done at 200 (met, 100 s): 2400/100 = 24 of 40 -> 0.6 > 0.4: CPUFrac 0.6.
    assert ev[8]["estimator"]["fraction"] == pytest.approx(0.6)
    # p6 is past its deadline (70 s > 50 s) but has 10 tasks <= 1000: it runs on.
    # p7: ceil(0.6 * 20) = 12 of the 16 free.
    assert acts(ev[9]) == [("p7", "admit", 12)]


def test_kill_rule_in_a_scenario() -> None:
    scenario = {
        "policy": "justice",
        "capacity": 100,
        "drop_threshold": 50,
        "events": [
            {"t": 0, "submit": {"id": "big", "tasks": 60, "deadline_s": 10}},
            {"t": 0, "submit": {"id": "small", "tasks": 40, "deadline_s": 10}},
            {"t": 20, "submit": {"id": "next", "tasks": 60, "deadline_s": 100}},
        ],
    }
    ev = run_scenario(scenario)["events"]
    # At 20 both are 10 s late; big (60 > 50) is killed, small (40) runs on. The 60 freed CPUs
    # take next's bootstrap request of 60.
    assert acts(ev[2]) == [("big", "kill", 60), ("next", "admit", 60)]


def test_table_renders() -> None:
    scenario = load("justice_sequence.json")
    text = render(scenario, run_scenario(scenario), "table")
    assert "drop    j8" in text and "needs 210 CPUs" in text


BASE: dict[str, Any] = {
    "policy": "justice",
    "capacity": 10,
    "events": [
        {"t": 0, "submit": {"id": "a", "tasks": 2, "deadline_s": 10}},
        {"t": 5, "complete": {"id": "a", "comp_time": 4}},
    ],
}


def mutate(path: list[Any], value: Any) -> dict[str, Any]:
    scenario = copy.deepcopy(BASE)
    target: Any = scenario
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return scenario


@pytest.mark.parametrize(
    ("scenario", "field"),
    [
        (mutate(["events", 0, "submit", "deadline_s"], 0), "events[0].submit.deadline_s"),
        (mutate(["events", 0, "submit", "tasks"], 1.5), "events[0].submit.tasks"),
        (mutate(["events", 0, "submit", "owner"], "x"), "events[0].submit.owner"),
        (mutate(["events", 1, "complete", "id"], "zzz"), "events[1].complete.id"),
        (mutate(["events", 1, "complete", "comp_time"], -1), "events[1].complete.comp_time"),
        (mutate(["events", 1, "t"], -1), "events[1].t"),
        (mutate(["events", 1, "submit"], {"id": "b"}), "events[1]"),
        (
            mutate(["events", 1], {"t": 6, "submit": {"id": "a", "tasks": 1, "deadline_s": 1}}),
            "events[1].submit.id",
        ),
        (mutate(["capacity"], 0), "capacity"),
        (mutate(["smoothing"], "median"), "smoothing"),
        (mutate(["alpha"], 2), "alpha"),
        (mutate(["drop_threshold"], -5), "drop_threshold"),
        (mutate(["queues"], {}), "queues"),
        (mutate(["events"], {}), "events"),
    ],
)
def test_validation_names_the_field(scenario: dict[str, Any], field: str) -> None:
    with pytest.raises(PolicyError) as err:
        run_scenario(scenario)
    assert err.value.field == field


def test_output_is_plain_json() -> None:
    result = run_scenario(BASE)
    assert json.loads(json.dumps(result)) == result
    assert set(result["events"][0]) >= {"t", "decisions", "estimator"}
    assert set(result["events"][0]["estimator"]) >= {"min", "max", "last", "fraction"}


@pytest.mark.parametrize(
    "path",
    sorted([*SCENARIOS.glob("justice_*.json"), *SCENARIOS.glob("pythia_*.json")]),
    ids=lambda p: p.name,
)
def test_every_example_runs(path: Path) -> None:
    scenario = json.loads(path.read_text())
    result = run_scenario(scenario)
    assert len(result["events"]) == len(scenario["events"])
    assert json.loads(json.dumps(result)) == result


def test_kill_rule_example() -> None:
    ev = run_scenario(load("justice_kill_rule.json"))["events"]
    assert acts(ev[2]) == [("big", "kill", 60), ("next", "admit", 60)]
    # small (40 tasks <= 50) ran on past its deadline and still taught the estimator at 30:
    # 600/10 = 60 CPUs for 40 tasks -> rate 1.5, last 40/40 = 1.
    assert ev[3]["estimator"]["min"] == pytest.approx(1.5)
    assert ev[3]["estimator"]["last"] == pytest.approx(1.0)
