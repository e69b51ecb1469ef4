"""Playground scenarios for ``prism`` (``docs/policies.md``, "Playground scenarios"; seed 003
sections 3 to 5, eqs. 1 to 6 and Algorithm 1).

Input, one JSON object (unknown keys are errors)::

    {"policy": "prism",
     "alpha": 1.0, "epsilon": 0.1, "urgency_a": 0.1, "top_k": 20, "share": "dominant",
     "now_s": 100,
     "node": {"id": "n1", "capacity": {"vcores": 8, "memory_mb": 8192},
              "free": {"vcores": 4, "memory_mb": 4096}},
     "jobs": {"A": {"usage": {"vcores": 4, "memory_mb": 2048},
                    "maps": {"pending": 4, "running": 2}, "reduces": {"pending": 0, "running": 0},
                    "profile": {"map": {"vcores": 1, "memory_mb": 1024, "duration_s": 10},
                                "merge": {...}, "shuffle": {...}, "reduce": {...}}}, ...},
     "paused": {"a1": {"job": "A", "next_phase": "merge", "paused_since_s": 90}, ...}}

The five parameters are optional (defaults of the ``prism`` registry entry). ``node.id`` defaults
to ``"node"``; ``usage``, ``maps``, ``reduces`` and ``paused`` default to empty; a job's ``usage``
is its cluster-wide usage; ``pending`` counts tasks launchable now, ``running`` tasks launched and
not finished. Every job needs all four phase profiles (``duration_s`` defaults to 0).

Output: ``{"policy": "prism", "node", "now_s", "picks": [{"step", "job", "task", "phase",
"leading", "t_wait_s", "vcores", "memory_mb", "fits", "fairness", "perf", "utility",
"duration_s", "free_after", "considered": [...]}], "free_after", "stop_reason",
"last_considered"}``; ``task`` is null for a new task's leading phase.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.policies.base import PolicyError, finite_number
from app.policies.prism import core as policy
from app.policies.scenario import as_mapping, as_str, check_keys, from_policy, require

_PARAM_KEYS = ("alpha", "epsilon", "urgency_a", "top_k", "share")
_TOP_KEYS = ("policy", *_PARAM_KEYS, "now_s", "node", "jobs", "paused")


def _params(scenario: Mapping[str, Any]) -> policy.PrismParams:
    values = {k: scenario[k] for k in _PARAM_KEYS if k in scenario}
    return from_policy("", lambda: policy.make_params(values))


def _demand(raw: Any, where: str) -> policy.Demand:
    body = as_mapping(raw, where)
    check_keys(body, ("vcores", "memory_mb"), where)
    vcores = finite_number(body.get("vcores", 0.0), f"{where}.vcores", low=0)
    memory = finite_number(body.get("memory_mb", 0.0), f"{where}.memory_mb", low=0)
    return policy.Demand(vcores, memory)


def _node(scenario: Mapping[str, Any]) -> policy.NodeView:
    body = as_mapping(require(scenario, "node", ""), "node")
    check_keys(body, ("id", "capacity", "free"), "node")
    node_id = as_str(body.get("id", "node"), "node.id")
    capacity = _demand(require(body, "capacity", "node"), "node.capacity")
    free = _demand(require(body, "free", "node"), "node.free")
    return from_policy("", lambda: policy.NodeView(node_id, capacity, free))


def _phase(raw: Any, where: str) -> policy.PhaseProfile:
    body = as_mapping(raw, where)
    check_keys(body, ("vcores", "memory_mb", "duration_s"), where)
    vcores = finite_number(require(body, "vcores", where), f"{where}.vcores", low=0)
    memory = finite_number(require(body, "memory_mb", where), f"{where}.memory_mb", low=0)
    duration = finite_number(body.get("duration_s", 0.0), f"{where}.duration_s", low=0)
    return policy.PhaseProfile(vcores, memory, duration)


def _profile(raw: Any, where: str) -> policy.JobProfile:
    body = as_mapping(raw, where)
    check_keys(body, policy.PHASES, where)
    phases = {p: _phase(require(body, p, where), f"{where}.{p}") for p in policy.PHASES}
    return policy.JobProfile(**phases)


def _whole(value: Any, where: str) -> int:
    num = finite_number(value, where, low=0)
    if num != int(num):
        raise PolicyError(where, f"must be a whole number, got {value!r}")
    return int(num)


def _counts(raw: Any, where: str) -> policy.TaskCounts:
    body = as_mapping(raw, where)
    check_keys(body, ("pending", "running"), where)
    pending = _whole(body.get("pending", 0), f"{where}.pending")
    running = _whole(body.get("running", 0), f"{where}.running")
    return policy.TaskCounts(pending, running)


def _job(name: str, raw: Any, where: str) -> policy.PrismJob:
    body = as_mapping(raw, where)
    check_keys(body, ("usage", "maps", "reduces", "profile"), where)
    return policy.PrismJob(
        id=name,
        profile=_profile(require(body, "profile", where), f"{where}.profile"),
        usage=_demand(body.get("usage", {}), f"{where}.usage"),
        maps=_counts(body.get("maps", {}), f"{where}.maps"),
        reduces=_counts(body.get("reduces", {}), f"{where}.reduces"),
    )


def _jobs(scenario: Mapping[str, Any]) -> list[policy.PrismJob]:
    body = as_mapping(require(scenario, "jobs", ""), "jobs")
    return [_job(name, raw, f"jobs.{name}") for name, raw in body.items()]


def _paused_task(name: str, raw: Any, known: set[str], now_s: float) -> policy.PausedTask:
    where = f"paused.{name}"
    task = as_mapping(raw, where)
    check_keys(task, ("job", "next_phase", "paused_since_s"), where)
    job = as_str(require(task, "job", where), f"{where}.job")
    if job not in known:
        raise PolicyError(f"{where}.job", f"names a job not declared in jobs: {job!r}")
    phase = as_str(require(task, "next_phase", where), f"{where}.next_phase")
    since = finite_number(
        require(task, "paused_since_s", where), f"{where}.paused_since_s", low=None
    )
    if since > now_s:
        raise PolicyError(f"{where}.paused_since_s", f"is after now_s ({now_s:g})")
    return from_policy(where, lambda: policy.PausedTask(name, job, phase, since))


def _paused(
    scenario: Mapping[str, Any], jobs: Sequence[policy.PrismJob], now_s: float
) -> list[policy.PausedTask]:
    body = as_mapping(scenario.get("paused", {}), "paused")
    known = {j.id for j in jobs}
    return [_paused_task(name, raw, known, now_s) for name, raw in body.items()]


def run(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the scenario and run Algorithm 1 for one heartbeat; returns JSON-ready output."""
    check_keys(scenario, _TOP_KEYS, "")
    if scenario.get("policy") != "prism":
        raise PolicyError("policy", f"must be prism, got {scenario.get('policy')!r}")
    params = _params(scenario)
    now_s = finite_number(require(scenario, "now_s", ""), "now_s", low=None)
    node = _node(scenario)
    jobs = _jobs(scenario)
    paused = _paused(scenario, jobs, now_s)
    result = from_policy("", lambda: policy.schedule(node, jobs, paused, now_s, params))
    return {"policy": "prism", "now_s": now_s, **result.to_dict()}


def _num(value: float) -> str:
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


_HEAD = ("step", "job", "task", "phase", "vcores", "memory_mb", "fairness", "perf", "utility")


def table(result: Mapping[str, Any]) -> str:
    """One row per started phase with its utility parts and the free resources left."""
    rows = [[*_HEAD, "free_after"]]
    for p in result["picks"]:
        free = p["free_after"]
        rows.append(
            [str(p["step"]), p["job"], p["task"] or "(new)", p["phase"]]
            + [_num(p[k]) for k in ("vcores", "memory_mb", "fairness", "perf", "utility")]
            + [f"<{_num(free['vcores'])}, {_num(free['memory_mb'])}>"]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    head = f"policy: prism  node: {result['node']}  now_s: {_num(result['now_s'])}"
    return "\n".join([head, *lines, f"stopped: {result['stop_reason']}"])
