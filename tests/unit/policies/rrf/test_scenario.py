"""RRF playground: Table 9.3 through ``run_scenario``, IWA output and field-named errors."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from app.playground import render, run_scenario
from app.policies.base import PolicyError

SCENARIOS = Path(__file__).resolve().parents[4] / "examples" / "scenarios"
TOL = 1e-9

# docs/policies.md's worked example (Table 9.3 input); wdrf is standard progressive filling.
EXPECTED: dict[str, dict[str, tuple[float, float]]] = {
    "tshirt": {"VM1": (5, 2.5), "VM2": (5, 2.5), "VM3": (10, 5)},
    "wmmf": {"VM1": (6, 3), "VM2": (6, 1), "VM3": (8, 6)},
    "wdrf": {"VM1": (6, 3), "VM2": (56 / 9, 7 / 9), "VM3": (56 / 9, 56 / 9)},
    "rrf": {"VM1": (5, 2.5), "VM2": (7, 1), "VM3": (8, 6.5)},
}


def table_9_3() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SCENARIOS / "rrf_table_9_3.json").read_text())
    return data


@pytest.mark.parametrize("algorithm", sorted(EXPECTED))
def test_table_9_3_through_the_playground(algorithm: str) -> None:
    result = run_scenario(table_9_3())
    for tenant, (vcores, memory) in EXPECTED[algorithm].items():
        got = result[algorithm][tenant]
        assert got["vcores"] == pytest.approx(vcores, abs=TOL)
        assert got["memory"] == pytest.approx(memory, abs=TOL)


def test_extra_outputs() -> None:
    result = run_scenario(table_9_3())
    assert result["contributions"] == pytest.approx({"VM1": 0, "VM2": 300, "VM3": 200})
    assert result["beta"]["rrf"] == pytest.approx({"VM1": 1.0, "VM2": 0.9, "VM3": 1.05})
    assert result["beta"]["tshirt"] == pytest.approx({"VM1": 1.0, "VM2": 1.0, "VM3": 1.0})
    assert result["yarn"]["VM3"] == "[memory=6656,vcores=8]"  # 6.5 GB * 1024, 8 vcores
    assert "iwa" not in result
    assert json.loads(json.dumps(result)) == result


def test_table_renders() -> None:
    scenario = table_9_3()
    text = render(scenario, run_scenario(scenario), "table")
    assert "<7, 1>" in text and "<6.222, 0.7778>" in text


def iwa_scenario() -> dict[str, Any]:
    return {
        "policy": "rrf",
        "capacity": {"vcores": 10, "memory": 10},
        "tenants": {
            "A": {
                "shares": {"vcores": 500, "memory": 500},
                "vms": {
                    "a1": {
                        "shares": {"vcores": 200, "memory": 200},
                        "demand": {"vcores": 1, "memory": 4},
                    },
                    "a2": {
                        "shares": {"vcores": 200, "memory": 200},
                        "demand": {"vcores": 1, "memory": 3},
                    },
                    "a3": {
                        "shares": {"vcores": 100, "memory": 100},
                        "demand": {"vcores": 3, "memory": 0},
                    },
                },
            },
            "B": {"shares": {"vcores": 500, "memory": 500}, "demand": {"vcores": 6, "memory": 6}},
        },
    }


def test_iwa_per_vm() -> None:
    result = run_scenario(iwa_scenario())
    # A's demand is the sum of its VMs' <5, 7>; it keeps <5, 5>. Algorithm 3 (see test_rrf):
    # a1 <1, 2 + 2/3>, a2 <1, 2 + 1/3>, a3 <3, 0>.
    split = result["iwa"]["A"]
    assert split["a1"] == pytest.approx({"vcores": 1, "memory": 8 / 3})
    assert split["a2"] == pytest.approx({"vcores": 1, "memory": 7 / 3})
    assert split["a3"] == pytest.approx({"vcores": 3, "memory": 0})
    assert set(result["iwa"]) == {"A"}


def mutate(base: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    scenario = copy.deepcopy(base)
    target: Any = scenario
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return scenario


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (["tenants", "VM2", "demand", "memory"], -1, "tenants.VM2.demand.memory"),
        (["tenants", "VM2", "demand", "memory"], "1", "tenants.VM2.demand.memory"),
        (["tenants", "VM2", "demand", "gpu"], 1, "tenants.VM2.demand.gpu"),
        (["tenants", "VM1", "weight"], 1, "tenants.VM1.weight"),
        (["tenants", "VM3", "shares"], [1, 2], "tenants.VM3.shares"),
        (["capacity", "vcores"], 0, "capacity.vcores"),
        (["tenants"], {}, "tenants"),
        (["rounds"], [], "rounds"),
        (["memory_mb_per_unit"], 0, "memory_mb_per_unit"),
    ],
)
def test_validation_names_the_field(path: list[str], value: Any, field: str) -> None:
    with pytest.raises(PolicyError) as err:
        run_scenario(mutate(table_9_3(), path, value))
    assert err.value.field == field


def test_missing_fields_are_named() -> None:
    scenario = table_9_3()
    del scenario["tenants"]["VM1"]["demand"]
    with pytest.raises(PolicyError) as err:
        run_scenario(scenario)
    assert err.value.field == "tenants.VM1.demand"


def test_vm_errors_are_named() -> None:
    bad = mutate(iwa_scenario(), ["tenants", "A", "vms", "a2", "demand", "vcores"], -2)
    with pytest.raises(PolicyError) as err:
        run_scenario(bad)
    assert err.value.field == "tenants.A.vms.a2.demand.vcores"
    # A tenant demand that disagrees with its VMs' sum (<5, 7>) is rejected.
    bad = mutate(iwa_scenario(), ["tenants", "A", "demand"], {"vcores": 5, "memory": 6})
    with pytest.raises(PolicyError) as err:
        run_scenario(bad)
    assert err.value.field == "tenants.A.demand.memory"
    zero = mutate(iwa_scenario(), ["tenants", "A", "vms", "a1", "shares", "vcores"], 0)
    zero["tenants"]["A"]["vms"]["a2"]["shares"]["vcores"] = 0
    zero["tenants"]["A"]["vms"]["a3"]["shares"]["vcores"] = 0
    with pytest.raises(PolicyError) as err:
        run_scenario(zero)
    assert err.value.field == "tenants.A.vms.*.shares.vcores"


def test_iwa_example_matches_inline_scenario() -> None:
    example = json.loads((SCENARIOS / "rrf_iwa.json").read_text())
    assert run_scenario(example) == run_scenario(iwa_scenario())
