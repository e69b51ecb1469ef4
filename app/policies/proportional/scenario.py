"""Playground scenarios for ``proportional``.

Input: ``{"policy": "proportional", "params": {"floor": f}, "queues": {name: {"pending": d}}}``
(``params`` optional). Output: ``{"policy", "floor", "pending", "shares"}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.policies.base import PolicyError, finite_number
from app.policies.proportional import core
from app.policies.scenario import as_mapping, check_keys, from_policy, require


def run(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """Validate and run one scenario."""
    check_keys(scenario, ("policy", "params", "queues"), "")
    params = as_mapping(scenario.get("params", {}), "params")
    values = from_policy("params", lambda: core.SPEC.validate(params))
    queues = as_mapping(require(scenario, "queues", ""), "queues")
    if not queues:
        raise PolicyError("queues", "at least one queue is needed")
    pending: dict[str, float] = {}
    for name, spec in queues.items():
        body = as_mapping(spec, f"queues.{name}")
        check_keys(body, ("pending",), f"queues.{name}")
        pending[name] = finite_number(body.get("pending", 0), f"queues.{name}.pending", low=0)
    floor = float(values["floor"])
    shares = from_policy("", lambda: core.shares(pending, floor))
    return {"policy": "proportional", "floor": floor, "pending": pending, "shares": shares}


def table(result: Mapping[str, Any]) -> str:
    """One line per queue: pending demand and share."""
    lines = [f"proportional (floor {result['floor']:g})", "queue     pending     share"]
    for q, share in result["shares"].items():
        lines.append(f"{q:<9} {result['pending'][q]:>7g} {share:>9.4f}")
    return "\n".join(lines)
