"""Playground scenarios for ``fawkes`` (``docs/policies.md``, "Playground scenarios" and "Fawkes
weights"; seed 000 section 4).

Input: ``{"policy": "fawkes", "weighting": "TD", "tau": 10, "psi": 0.5, "a": 2, "interval_s": 60,
"queues": {name: {"min_share": m, "floor": f}}, "ticks": [{"t": 0, "queues": {name: {samples}}}]}``.
Everything but ``policy``, ``queues`` and ``ticks`` has the registry default; ``min_share`` and
``floor`` default to 0. The per-tick samples are the ``QueueSample`` fields (``docs/policies.md``
lists them under "Playground scenarios"; its "Fawkes weights" section calls the same object
``samples``, the scenario section's key ``queues`` is the one accepted). A queue missing from a
tick was idle during that interval. Output: ``{"policy": "fawkes", "ticks": [decision, ...]}``
with each decision's ``t``, ``admitted``, ``waiting``, ``weights``, ``discrimination``,
``factor``, ``rebalanced``, ``shares`` (plus ``newly_admitted``, ``deactivated``, ``unassigned``,
``reason``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from app.policies.base import PolicyError, finite_number
from app.policies.fawkes import core as fawkes
from app.policies.scenario import as_list, as_mapping, check_keys, require

_PARAM_KEYS = ("weighting", "tau", "psi", "a", "interval_s")
_TOP_KEYS = ("policy", *_PARAM_KEYS, "queues", "ticks")
_SAMPLE_KEYS = tuple(f.name for f in fields(fawkes.QueueSample))


def _policy_field(field: str) -> str:
    """Map a ``FawkesParams`` field name to the scenario's path for it."""
    head, _, queue = field.partition(".")
    if head == "min_shares" and queue:
        return f"queues.{queue}.min_share"
    if head == "floors" and queue:
        return f"queues.{queue}.floor"
    return "queues" if head in ("min_shares", "floors") else field


def _params(scenario: Mapping[str, Any]) -> fawkes.FawkesParams:
    queues = as_mapping(require(scenario, "queues", ""), "queues")
    mins: dict[str, float] = {}
    floors: dict[str, float] = {}
    for name, spec in queues.items():
        where = f"queues.{name}"
        body = as_mapping(spec, where)
        check_keys(body, ("min_share", "floor"), where)
        mins[name] = finite_number(body.get("min_share", 0.0), f"{where}.min_share", low=0)
        floors[name] = finite_number(body.get("floor", 0.0), f"{where}.floor", low=0)
    values = {key: scenario[key] for key in _PARAM_KEYS if key in scenario}
    try:
        return fawkes.FawkesParams.from_values(values, min_shares=mins, floors=floors)
    except PolicyError as exc:
        raise PolicyError(_policy_field(exc.field), exc.message) from exc


def _sample(body: Mapping[str, Any], where: str) -> fawkes.QueueSample:
    check_keys(body, _SAMPLE_KEYS, where)
    values: dict[str, Any] = {}
    for key, value in body.items():
        if key == "slowdowns":
            items = as_list(value, f"{where}.slowdowns")
            values[key] = tuple(
                finite_number(v, f"{where}.slowdowns[{k}]", low=0) for k, v in enumerate(items)
            )
        else:
            values[key] = finite_number(value, f"{where}.{key}", low=0)
    try:
        return fawkes.QueueSample(**values)
    except PolicyError as exc:
        raise PolicyError(f"{where}.{exc.field}", exc.message) from exc


def _tick(item: Any, k: int, declared: Mapping[str, float]) -> fawkes.FawkesTick:
    where = f"ticks[{k}]"
    body = as_mapping(item, where)
    check_keys(body, ("t", "queues"), where)
    t = finite_number(require(body, "t", where), f"{where}.t", low=None)
    samples = as_mapping(body.get("queues", {}), f"{where}.queues")
    parsed: dict[str, fawkes.QueueSample] = {}
    for name, sample in samples.items():
        field = f"{where}.queues.{name}"
        if name not in declared:
            raise PolicyError(field, "names a queue not declared in queues")
        parsed[name] = _sample(as_mapping(sample, field), field)
    return fawkes.FawkesTick(t=t, queues=parsed)


def run(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the scenario and play its ticks; returns the JSON-ready result."""
    check_keys(scenario, _TOP_KEYS, "")
    if scenario.get("policy") != "fawkes":
        raise PolicyError("policy", f"must be fawkes, got {scenario.get('policy')!r}")
    params = _params(scenario)
    items = as_list(require(scenario, "ticks", ""), "ticks")
    ticks = [_tick(item, k, params.min_shares) for k, item in enumerate(items)]
    state = fawkes.FawkesState()
    out: list[dict[str, Any]] = []
    for k, tick in enumerate(ticks):
        try:
            decision, state = fawkes.step(state, tick, params)
        except PolicyError as exc:
            raise PolicyError(f"ticks[{k}].{exc.field}", exc.message) from exc
        out.append(decision.to_dict())
    return {"policy": "fawkes", "ticks": out}


def _fmt(value: float) -> str:
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _status(decision: Mapping[str, Any], queue: str) -> str:
    if queue in decision["newly_admitted"]:
        return "admitted (new)"
    if queue in decision["admitted"]:
        return "admitted"
    if queue in decision["waiting"]:
        return "waiting"
    return "deactivated" if queue in decision["deactivated"] else "inactive"


def _tick_table(decision: Mapping[str, Any]) -> list[str]:
    head = (
        f"t={_fmt(decision['t'])}  factor={_fmt(decision['factor'])}  "
        f"rebalanced={str(decision['rebalanced']).lower()}  ({decision['reason']})"
    )
    rows = [("queue", "status", "weight", "D", "share")]
    for queue, share in decision["shares"].items():
        weight = decision["weights"].get(queue)
        disc = decision["discrimination"].get(queue)
        rows.append(
            (
                queue,
                _status(decision, queue),
                "" if weight is None else _fmt(weight),
                "" if disc is None else _fmt(disc),
                _fmt(share),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return [head, *(line.rstrip() for line in lines)]


def table(result: Mapping[str, Any]) -> str:
    """Per tick: a header with factor and rebalance, then one row per queue."""
    lines = ["policy: fawkes"]
    for decision in result["ticks"]:
        lines.extend(_tick_table(decision))
    return "\n".join(lines)
