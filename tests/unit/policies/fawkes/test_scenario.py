"""``yarn-sidecar policy run`` for fawkes (docs/policies.md "Playground scenarios", "Fawkes
weights")."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from app.playground import load_scenario, render, run_scenario
from app.policies.base import PolicyError

EXAMPLES = Path(__file__).resolve().parents[4] / "examples" / "scenarios"


def test_td_imbalanced_by_hand() -> None:
    result = run_scenario(load_scenario(EXAMPLES / "fawkes_td_imbalanced.json"))
    ticks = result["ticks"]
    # t=0: TD weights 10, 10, 80 of 100; minimums .1 -> breakpoints .1/.1 = 1 (a, b),
    # .1/.8 = .125 (c). Raising c: lambda = (1 - .2) / .8 = 1 <= 1 -> shares .1, .1, .8.
    t0 = ticks[0]
    assert t0["admitted"] == ["a", "b", "c"]
    assert t0["weights"] == pytest.approx({"a": 0.1, "b": 0.1, "c": 0.8})
    assert t0["discrimination"] == {"a": 0.0, "b": 0.0, "c": 0.0}
    assert (t0["factor"], t0["rebalanced"]) == (0.0, False)
    assert t0["shares"] == pytest.approx({"a": 0.1, "b": 0.1, "c": 0.8})
    # t=60: w = 5, 15, 80 /100; D = (.1 - .05)*60 = 3, (.1 - .15)*60 = -3, (.8 - .8)*60 = 0
    # factor = (9 + 9 + 0) / 3 = 6 <= tau 10: shares kept
    t1 = ticks[1]
    assert t1["discrimination"] == pytest.approx({"a": 3, "b": -3, "c": 0})
    assert t1["factor"] == pytest.approx(6)
    assert t1["rebalanced"] is False
    assert t1["shares"] == pytest.approx({"a": 0.1, "b": 0.1, "c": 0.8})
    # t=120: w = 0, .3, .7; D = 3 + .1*60 = 9, -3 + (.1 - .3)*60 = -15, (.8 - .7)*60 = 6
    # factor = (81 + 225 + 36) / 3 = 114 > 10: water-fill, a (w 0) at .1; breakpoints b .333,
    # c .143: c alone gives lambda = .8/.7 > .333, so b too: lambda = .9 / 1 -> b .27, c .63
    t2 = ticks[2]
    assert t2["discrimination"] == pytest.approx({"a": 9, "b": -15, "c": 6})
    assert t2["factor"] == pytest.approx(114)
    assert t2["rebalanced"] is True
    assert t2["shares"] == pytest.approx({"a": 0.1, "b": 0.27, "c": 0.63})
    # t=180: a absent (idle 60 s, not longer than T): still admitted with c_a = 0, w_a = 0
    # D = 9, -15 + (.27 - .3)*60 = -16.8, 6 + (.63 - .7)*60 = 1.8; factor = 366.48 / 3 = 122.16
    t3 = ticks[3]
    assert t3["admitted"] == ["a", "b", "c"]
    assert t3["discrimination"] == pytest.approx({"a": 9, "b": -16.8, "c": 1.8})
    assert t3["factor"] == pytest.approx(122.16)
    # t=240: a idle 120 s > 60: deactivated, share 0; D_b = -18.6, D_c = -2.4
    # factor = (345.96 + 5.76) / 2 = 175.86; shares = weights .3, .7 (minimums do not bind)
    t4 = ticks[4]
    assert t4["admitted"] == ["b", "c"]
    assert t4["deactivated"] == ["a"]
    assert t4["discrimination"] == pytest.approx({"b": -18.6, "c": -2.4})
    assert t4["factor"] == pytest.approx(175.86)
    assert t4["shares"] == pytest.approx({"a": 0.0, "b": 0.3, "c": 0.7})


def test_activation_fifo_by_hand() -> None:
    result = run_scenario(load_scenario(EXAMPLES / "fawkes_activation_fifo.json"))
    t0, t1, t2, t3 = result["ticks"]
    # minimums .5 each: a and b fill the cluster, c waits
    assert (t0["admitted"], t0["waiting"]) == (["a", "b"], ["c"])
    assert t0["shares"] == pytest.approx({"a": 0.5, "b": 0.5, "c": 0.0})
    # t=60: JD weights 0, 1 -> D_a = (.2 - 0)*60 = 12, D_b = (.8 - 1)*60 = -12, factor 144
    assert (t1["admitted"], t1["waiting"]) == (["a", "b"], ["c"])
    assert t1["discrimination"] == pytest.approx({"a": 12, "b": -12})
    assert t1["factor"] == pytest.approx(144)
    # t=120: a idle 120 s > 60 -> deactivated, c admitted (D 0); w = 1/4, 3/4
    # D_b = -12 + (.9 - .25)*60 = 27; factor = 27^2 / 2 = 364.5
    assert (t2["admitted"], t2["waiting"], t2["deactivated"]) == (["b", "c"], [], ["a"])
    assert t2["discrimination"] == pytest.approx({"b": 27, "c": 0})
    assert t2["factor"] == pytest.approx(364.5)
    assert t2["rebalanced"] is False
    assert t2["shares"] == pytest.approx({"a": 0.0, "b": 0.5, "c": 0.5})
    # t=180: w = 1/3, 2/3: D_b = 27 + (.5 - 1/3)*60 = 37, D_c = (.5 - 2/3)*60 = -10
    assert t3["discrimination"] == pytest.approx({"b": 37, "c": -10})
    assert t3["factor"] == pytest.approx((37**2 + 10**2) / 2)


def test_output_keys_json_and_table() -> None:
    scenario = load_scenario(EXAMPLES / "fawkes_td_imbalanced.json")
    result = run_scenario(scenario)
    for tick in result["ticks"]:
        assert {
            "admitted", "waiting", "weights", "discrimination", "factor", "rebalanced", "shares",
        } <= set(tick)  # fmt: skip
    assert json.loads(render(scenario, result, "json")) == result
    table = render(scenario, result, "table")
    assert "t=120  factor=114  rebalanced=true" in table
    assert any(
        line.split() == ["b", "admitted", "0.3", "-15", "0.27"] for line in table.splitlines()
    )


def _base() -> dict[str, Any]:
    return load_scenario(EXAMPLES / "fawkes_td_imbalanced.json")


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
        (_with(["colour"], 1), "colour"),
        (_with(["weighting"], "XY"), "weighting"),
        (_with(["weighting"], None), "weighting"),
        (_with(["tau"], -1), "tau"),
        (_with(["psi"], 1), "psi"),
        (_with(["a"], 0.5), "a"),
        (_with(["interval_s"], 0), "interval_s"),
        (_with(["queues", "a", "min_share"], 2), "queues.a.min_share"),
        (_with(["queues", "a", "floor"], 0.5), "queues.a.floor"),
        (_with(["queues", "a", "weight"], 1), "queues.a.weight"),
        (_with(["ticks"], {}), "ticks"),
        (_with(["ticks", 1, "t"], 0), "ticks[1].t"),
        (_with(["ticks", 1, "when"], 0), "ticks[1].when"),
        (_with(["ticks", 0, "queues", "z"], {}), "ticks[0].queues.z"),
        (
            _with(["ticks", 0, "queues", "a", "waiting_tasks"], -1),
            "ticks[0].queues.a.waiting_tasks",
        ),
        (
            _with(["ticks", 0, "queues", "a", "waiting_tasks"], "x"),
            "ticks[0].queues.a.waiting_tasks",
        ),
        (
            _with(["ticks", 0, "queues", "a", "used_fraction"], 1.5),
            "ticks[0].queues.a.used_fraction",
        ),
        (
            _with(["ticks", 0, "queues", "a", "slowdowns"], [1, -1]),
            "ticks[0].queues.a.slowdowns[1]",
        ),
        (_with(["ticks", 0, "queues", "a", "slowdowns"], 2), "ticks[0].queues.a.slowdowns"),
        (_with(["ticks", 0, "queues", "a", "colour"], 2), "ticks[0].queues.a.colour"),
        (_with(["ticks", 2, "queues", "b"], 3), "ticks[2].queues.b"),
    ],
)
def test_validation_errors_name_the_field(scenario: dict[str, Any], field: str) -> None:
    with pytest.raises(PolicyError) as info:
        run_scenario(scenario)
    assert info.value.field == field


def test_defaults_apply() -> None:
    scenario = {
        "policy": "fawkes",
        "queues": {"a": {}, "b": {}},
        "ticks": [{"t": 0, "queues": {"a": {"waiting_tasks": 1}, "b": {"waiting_tasks": 3}}}],
    }
    (tick,) = run_scenario(scenario)["ticks"]
    # default weighting TD: 1/4, 3/4
    assert tick["weights"] == pytest.approx({"a": 0.25, "b": 0.75})
    assert tick["shares"] == pytest.approx({"a": 0.25, "b": 0.75})
