"""Playground scenarios for ``hybridmr`` (``docs/policies.md``, "Playground scenarios"; seed 001
section III, Algorithms 1 to 3).

Input, one JSON object (unknown keys are errors)::

    {"policy": "hybridmr",
     "unknown_placement": "native", "combine": true, "throttle_share": 0.0,
     "profiles": [{"job_class": "sort", "partition": "virtual", "input_bytes": 1e10,
                   "cluster_size": 8, "map_s": 60, "reduce_s": 40, "total_s": 100}, ...],
     "partitions": {"native": 24, "virtual": 48},
     "estimates": [{"job_class": "sort", "input_bytes": 2e10, "cluster_size": 8,
                    "partition": "virtual"}, ...],
     "jobs": [{"id": "j1", "job_class": "sort", "input_bytes": 2e10, "workload": "batch",
               "desired_s": 300}, ...],
     "interference": {"nodes": {"vm1": {"capacity": 4, "interactive_load": 1}, ...},
                      "interactive": {"rubis": {"node": "vm1", "metric": 2.5, "sla": 2.0}, ...},
                      "tasks": {"t1": {"job": "j1", "node": "vm1", "vcores": 1,
                                       "interference": 0.3}, ...}}}

The three parameters are optional (defaults of the ``hybridmr`` registry entry). ``profiles`` is the
profile database (Phase I). ``estimates`` (optional) asks Algorithm 1 directly; ``partition``
defaults to ``virtual``. ``jobs`` (optional) runs Algorithm 2 in order and needs ``partitions``
(cluster size of each partition, nodes or vcores as in the profiles); ``workload`` defaults to
``batch``, and a batch job needs ``desired_s``. ``interference`` (optional) runs Algorithm 3;
``interactive_load`` defaults to 0.

Output: ``{"policy": "hybridmr", "estimates": [Estimate], "placements": [Placement], "native":
[ids], "virtual": [ids], "arbitration": {"violations", "actions", "free_after"} | null}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.policies.base import PolicyError, finite_number
from app.policies.hybridmr import core as policy
from app.policies.scenario import as_list, as_mapping, as_str, check_keys, from_policy, require

_PARAM_KEYS = ("unknown_placement", "combine", "throttle_share")
_TOP_KEYS = (
    "policy",
    *_PARAM_KEYS,
    "profiles",
    "partitions",
    "estimates",
    "jobs",
    "interference",
)
_PROFILE_KEYS = (
    "job_class",
    "partition",
    "input_bytes",
    "cluster_size",
    "map_s",
    "reduce_s",
    "total_s",
)


def _params(scenario: Mapping[str, Any]) -> policy.HybridParams:
    values = {k: scenario[k] for k in _PARAM_KEYS if k in scenario}
    return from_policy("", lambda: policy.make_params(values))


def _profile(raw: Any, where: str) -> policy.Observation:
    row = as_mapping(raw, where)
    check_keys(row, _PROFILE_KEYS, where)
    for key in _PROFILE_KEYS:
        require(row, key, where)
    job_class = as_str(row["job_class"], f"{where}.job_class")
    partition = as_str(row["partition"], f"{where}.partition")
    nums = {k: finite_number(row[k], f"{where}.{k}", low=None) for k in _PROFILE_KEYS[2:]}
    return from_policy(where, lambda: policy.Observation(job_class, partition, **nums))


def _db(scenario: Mapping[str, Any]) -> policy.ProfileDB:
    rows = as_list(require(scenario, "profiles", ""), "profiles")
    return policy.ProfileDB(tuple(_profile(r, f"profiles[{k}]") for k, r in enumerate(rows)))


def _partitions(scenario: Mapping[str, Any]) -> policy.Partitions:
    body = as_mapping(require(scenario, "partitions", ""), "partitions")
    check_keys(body, policy.PARTITIONS, "partitions")
    native = finite_number(
        require(body, "native", "partitions"), "partitions.native", positive=True
    )
    virtual = finite_number(
        require(body, "virtual", "partitions"), "partitions.virtual", positive=True
    )
    return policy.Partitions(native, virtual)


def _estimate(
    raw: Any, where: str, db: policy.ProfileDB, params: policy.HybridParams
) -> policy.Estimate:
    body = as_mapping(raw, where)
    check_keys(body, ("job_class", "input_bytes", "cluster_size", "partition"), where)
    job_class = as_str(require(body, "job_class", where), f"{where}.job_class")
    size = finite_number(require(body, "input_bytes", where), f"{where}.input_bytes", positive=True)
    nodes = finite_number(
        require(body, "cluster_size", where), f"{where}.cluster_size", positive=True
    )
    partition = as_str(body.get("partition", "virtual"), f"{where}.partition")
    return from_policy(
        where, lambda: policy.estimate(db, job_class, size, nodes, partition, params)
    )


def _job(raw: Any, where: str) -> tuple[policy.Job, float | None]:
    body = as_mapping(raw, where)
    check_keys(body, ("id", "job_class", "input_bytes", "workload", "desired_s"), where)
    job_id = as_str(require(body, "id", where), f"{where}.id")
    job_class = as_str(require(body, "job_class", where), f"{where}.job_class")
    size = finite_number(require(body, "input_bytes", where), f"{where}.input_bytes", positive=True)
    workload = as_str(body.get("workload", "batch"), f"{where}.workload")
    job = from_policy(where, lambda: policy.Job(job_id, job_class, size, workload))
    if "desired_s" in body:
        return job, finite_number(body["desired_s"], f"{where}.desired_s", positive=True)
    if workload == "batch":
        raise PolicyError(f"{where}.desired_s", "is required for a batch job")
    return job, None


def _placements(
    scenario: Mapping[str, Any], db: policy.ProfileDB, params: policy.HybridParams
) -> list[policy.Placement]:
    if "jobs" not in scenario:
        return []
    raw = as_list(scenario["jobs"], "jobs")
    jobs = [_job(item, f"jobs[{k}]") for k, item in enumerate(raw)]
    seen: set[str] = set()
    for k, (job, _) in enumerate(jobs):
        if job.id in seen:
            raise PolicyError(f"jobs[{k}].id", f"job {job.id!r} appears twice")
        seen.add(job.id)
    partitions = _partitions(scenario)
    return [policy.place(job, db, partitions, desired, params) for job, desired in jobs]


def _named(section: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    return as_mapping(section.get(key, {}), f"{where}.{key}")


def _arbitration(
    scenario: Mapping[str, Any], params: policy.HybridParams
) -> policy.Arbitration | None:
    if "interference" not in scenario:
        return None
    where = "interference"
    body = as_mapping(scenario[where], where)
    check_keys(body, ("nodes", "interactive", "tasks"), where)
    nodes = [_node(n, v, f"{where}.nodes.{n}") for n, v in _named(body, "nodes", where).items()]
    known = {n.id for n in nodes}
    apps = [
        _app(a, v, f"{where}.interactive.{a}", known)
        for a, v in _named(body, "interactive", where).items()
    ]
    tasks = [
        _task(t, v, f"{where}.tasks.{t}", known) for t, v in _named(body, "tasks", where).items()
    ]
    return from_policy(where, lambda: policy.arbitrate(apps, tasks, nodes, params))


def _node(name: str, raw: Any, where: str) -> policy.Node:
    body = as_mapping(raw, where)
    check_keys(body, ("capacity", "interactive_load"), where)
    capacity = finite_number(require(body, "capacity", where), f"{where}.capacity", low=0)
    load = finite_number(body.get("interactive_load", 0.0), f"{where}.interactive_load", low=0)
    return from_policy(where, lambda: policy.Node(name, capacity, load))


def _on_node(body: Mapping[str, Any], where: str, known: set[str]) -> str:
    node = as_str(require(body, "node", where), f"{where}.node")
    if node not in known:
        raise PolicyError(f"{where}.node", "names a node not declared in interference.nodes")
    return node


def _app(name: str, raw: Any, where: str, known: set[str]) -> policy.InteractiveApp:
    body = as_mapping(raw, where)
    check_keys(body, ("node", "metric", "sla"), where)
    node = _on_node(body, where, known)
    metric = finite_number(require(body, "metric", where), f"{where}.metric", low=0)
    sla = finite_number(require(body, "sla", where), f"{where}.sla", positive=True)
    return from_policy(where, lambda: policy.InteractiveApp(name, node, metric, sla))


def _task(name: str, raw: Any, where: str, known: set[str]) -> policy.BatchTask:
    body = as_mapping(raw, where)
    check_keys(body, ("job", "node", "vcores", "interference"), where)
    job = as_str(require(body, "job", where), f"{where}.job")
    node = _on_node(body, where, known)
    vcores = finite_number(require(body, "vcores", where), f"{where}.vcores", low=0)
    weight = finite_number(require(body, "interference", where), f"{where}.interference", low=0)
    return from_policy(where, lambda: policy.BatchTask(name, job, node, vcores, weight))


def run(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the scenario, then run Algorithms 1, 2 and 3 on it; returns JSON-ready output."""
    check_keys(scenario, _TOP_KEYS, "")
    if scenario.get("policy") != "hybridmr":
        raise PolicyError("policy", f"must be hybridmr, got {scenario.get('policy')!r}")
    params = _params(scenario)
    db = _db(scenario)
    queries = as_list(scenario.get("estimates", []), "estimates")
    estimates = [_estimate(q, f"estimates[{k}]", db, params) for k, q in enumerate(queries)]
    placements = _placements(scenario, db, params)
    arbitration = _arbitration(scenario, params)
    return {
        "policy": "hybridmr",
        "estimates": [e.to_dict() for e in estimates],
        "placements": [p.to_dict() for p in placements],
        "native": [p.job_id for p in placements if p.partition == "native"],
        "virtual": [p.job_id for p in placements if p.partition == "virtual"],
        "arbitration": None if arbitration is None else arbitration.to_dict(),
    }


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _grid(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


_ESTIMATE_HEAD = ("class", "partition", "input_bytes", "cluster", "rule", "map_s", "reduce_s")
_PLACEMENT_HEAD = ("job", "workload", "partition", "desired_s", "virtual_est_s", "native_est_s")


def _estimate_rows(estimates: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    rows = [[*_ESTIMATE_HEAD, "total_s", "rows"]]
    for e in estimates:
        basis = ",".join(str(k) for k in e["basis"]) or "-"
        sizes = [_num(e["input_bytes"]), _num(e["cluster_size"])]
        times = [_num(e["map_s"]), _num(e["reduce_s"]), _num(e["total_s"])]
        rows.append([e["job_class"], e["partition"], *sizes, e["rule"] or "none", *times, basis])
    return rows


def _placement_rows(placements: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    rows = [[*_PLACEMENT_HEAD, "reason"]]
    for p in placements:
        times = [_num(p["desired_s"]), _num(p["estimated_s"]), _num(p["native_estimated_s"])]
        rows.append([p["id"], p["workload"], p["partition"], *times, p["reason"]])
    return rows


def _arbitration_lines(arb: Mapping[str, Any]) -> list[str]:
    lines = [
        f"violation {v['app']} on {v['node']}: {_num(v['metric'])} > sla {_num(v['sla'])}"
        for v in arb["violations"]
    ]
    lines += [f"{a['action']} {a['task']} ({a['job']}): {a['reason']}" for a in arb["actions"]]
    if not arb["violations"]:
        lines.append("no SLA violation: nothing to do")
    return lines


def table(result: Mapping[str, Any]) -> str:
    """Estimates, placements and Phase II actions, one line each with the numbers behind them."""
    lines = ["policy: hybridmr"]
    if result["estimates"]:
        lines += ["", "estimates (Algorithm 1)", *_grid(_estimate_rows(result["estimates"]))]
    if result["placements"]:
        lines += ["", "placements (Algorithm 2)", *_grid(_placement_rows(result["placements"]))]
    if result["arbitration"] is not None:
        lines += ["", "interference (Algorithm 3)", *_arbitration_lines(result["arbitration"])]
    return "\n".join(lines)
