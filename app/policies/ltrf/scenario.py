"""Playground scenarios for ``ltrf`` and ``mlrf`` (``docs/policies.md``, "Playground scenarios" and
"Long-Term Resource Fairness"; seed 002 section 9.4, Table 9.2).

Input: ``{"policy": "ltrf" | "mlrf", "capacity": R, "discount": delta, "queues": {name:
{"weight": w}}, "rounds": [{"new_demand": {name: d}}, ...]}``. ``discount`` defaults to 1 and is
validated but ignored by MLRF; ``weight`` defaults to 1; a queue missing from ``new_demand`` has no
new demand that round. Output: ``{"policy", "rounds": [{"round", "demand", "entitlement", "alloc",
"counted", "total_counted", "debt"}], "totals": {"alloc", "counted", "debt"}}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.policies.base import PolicyError, finite_number
from app.policies.ltrf import core as ltrf
from app.policies.scenario import as_list, as_mapping, check_keys, require

_TOP_KEYS = ("policy", "capacity", "discount", "queues", "rounds")


def _weights(scenario: Mapping[str, Any]) -> dict[str, float]:
    queues = as_mapping(require(scenario, "queues", ""), "queues")
    if not queues:
        raise PolicyError("queues", "at least one queue is needed")
    out: dict[str, float] = {}
    for name, spec in queues.items():
        where = f"queues.{name}"
        body = as_mapping(spec, where)
        check_keys(body, ("weight",), where)
        out[name] = finite_number(body.get("weight", 1.0), f"{where}.weight", positive=True)
    return out


def _rounds(scenario: Mapping[str, Any], weights: Mapping[str, float]) -> list[dict[str, float]]:
    rounds = as_list(require(scenario, "rounds", ""), "rounds")
    out: list[dict[str, float]] = []
    for k, item in enumerate(rounds):
        where = f"rounds[{k}]"
        body = as_mapping(item, where)
        check_keys(body, ("new_demand",), where)
        demand = as_mapping(require(body, "new_demand", where), f"{where}.new_demand")
        parsed: dict[str, float] = {}
        for name, value in demand.items():
            field = f"{where}.new_demand.{name}"
            if name not in weights:
                raise PolicyError(field, "names a queue not declared in queues")
            parsed[name] = finite_number(value, field, low=0)
        out.append(parsed)
    return out


def _params(scenario: Mapping[str, Any]) -> ltrf.LtrfParams:
    discount = finite_number(scenario.get("discount", 1.0), "discount", low=None)
    try:
        return ltrf.LtrfParams(discount=discount, memoryless=scenario["policy"] == "mlrf")
    except PolicyError as exc:
        raise PolicyError(exc.field, exc.message) from exc


def run(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the scenario and play its rounds; returns the JSON-ready result."""
    check_keys(scenario, _TOP_KEYS, "")
    policy = scenario.get("policy")
    if policy not in ("ltrf", "mlrf"):
        raise PolicyError("policy", f"must be ltrf or mlrf, got {policy!r}")
    capacity = finite_number(require(scenario, "capacity", ""), "capacity", low=0)
    params = _params(scenario)
    weights = _weights(scenario)
    state = ltrf.LtrfState()
    rounds: list[dict[str, Any]] = []
    for k, new_demand in enumerate(_rounds(scenario, weights)):
        result, state = ltrf.round(state, new_demand, capacity, weights, params)
        rounds.append({"round": k + 1, **result.to_dict()})
    names = list(weights)
    totals = {
        "alloc": {q: state.total_alloc.get(q, 0.0) for q in names},
        "counted": {q: state.counted.get(q, 0.0) for q in names},
        "debt": {q: state.debt.get(q, 0.0) for q in names},
    }
    return {"policy": policy, "rounds": rounds, "totals": totals}


def _fmt(value: float) -> str:
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


_COLUMNS = ("demand", "alloc", "counted", "total_counted", "debt")


def table(result: Mapping[str, Any]) -> str:
    """One row per round and queue, then the totals."""
    rows = [("round", "queue", *_COLUMNS)]
    for item in result["rounds"]:
        for queue in item["alloc"]:
            values = (_fmt(item[col][queue]) for col in _COLUMNS)
            rows.append((f"t{item['round']}", queue, *values))
    totals = result["totals"]
    for queue in totals["alloc"]:
        rows.append(
            (
                "total",
                queue,
                "",
                _fmt(totals["alloc"][queue]),
                "",
                _fmt(totals["counted"][queue]),
                _fmt(totals["debt"][queue]),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    return f"policy: {result['policy']}\n" + "\n".join(lines)
