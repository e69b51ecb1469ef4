"""Playground handler for Justice and PYTHIA scenarios (``docs/policies.md`` "Playground
scenarios").

Input: ``{"policy": "justice" | "pythia", "capacity": C, "smoothing": "mean", "alpha": 0.5,
"drop_threshold": 1000, "events": [{"t": 0, "submit": {"id", "tasks", "deadline_s"}}, {"t": 80,
"complete": {"id", "comp_time"}}, ...]}`` (``error_history`` is accepted as the fifth policy
parameter). Every event carries exactly one of ``submit`` and ``complete``; times never decrease.

The scenario plays the sidecar's loop (seed 004, Algorithm 6 "on every submission and completion"):
a completion frees the job's CPUs and feeds TRACK_JOB (``numCPUsAllocd`` = the CPUs granted,
success = completed by ``submitted + deadline_s``), then ``admit`` runs over all waiting and running
jobs and its decisions are applied (admitted jobs start, dropped and killed jobs leave). Output per
event: the decisions and the estimator ``{min, max, last, fraction}`` after the event (``fraction``
is null while bootstrapping), plus ``free_cpus``; a ``summary`` counts outcomes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.policies.base import PolicyError, finite_number
from app.policies.justice import core as policy
from app.policies.justice.core import (
    Decision,
    EstimatorState,
    Job,
    JobOutcome,
    JusticeParams,
    RunningJob,
)
from app.policies.scenario import as_list, as_mapping, as_str, check_keys, require

_PARAM_KEYS = ("smoothing", "alpha", "drop_threshold", "error_history")
_TOP_KEYS = ("policy", "capacity", "events", *_PARAM_KEYS)
_SUBMIT_KEYS = ("id", "tasks", "deadline_s")
_COMPLETE_KEYS = ("id", "comp_time")


@dataclass
class _Cluster:
    """Mutable replay state of the scenario (the pure policy state is ``estimator``)."""

    capacity: int
    params: JusticeParams
    estimator: EstimatorState = field(default_factory=EstimatorState)
    waiting: dict[str, Job] = field(default_factory=dict)
    running: dict[str, RunningJob] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def free_cpus(self) -> int:
        return self.capacity - sum(j.cpus for j in self.running.values())


def _whole(value: Any, where: str, minimum: int) -> int:
    num = finite_number(value, where, low=minimum)
    if num != int(num):
        raise PolicyError(where, f"must be a whole number, got {value!r}")
    return int(num)


def _params(scenario: Mapping[str, Any]) -> JusticeParams:
    values = {k: scenario[k] for k in _PARAM_KEYS if k in scenario}
    try:
        return policy.make_params(str(scenario.get("policy")), values)
    except PolicyError as exc:
        raise PolicyError(exc.field, exc.message) from exc


def _submit(cluster: _Cluster, raw: Any, t: float, where: str) -> None:
    obj = as_mapping(raw, where)
    check_keys(obj, _SUBMIT_KEYS, where)
    job_id = as_str(require(obj, "id", where), f"{where}.id")
    if job_id in cluster.seen:
        raise PolicyError(f"{where}.id", f"job {job_id!r} was already submitted")
    tasks = _whole(require(obj, "tasks", where), f"{where}.tasks", 1)
    deadline = finite_number(
        require(obj, "deadline_s", where), f"{where}.deadline_s", positive=True
    )
    cluster.seen.add(job_id)
    cluster.waiting[job_id] = Job(job_id, tasks, deadline, t)


def _complete(cluster: _Cluster, raw: Any, t: float, where: str) -> None:
    obj = as_mapping(raw, where)
    check_keys(obj, _COMPLETE_KEYS, where)
    job_id = as_str(require(obj, "id", where), f"{where}.id")
    job = cluster.running.pop(job_id, None)
    if job is None:
        raise PolicyError(f"{where}.id", f"job {job_id!r} is not running")
    comp_time = finite_number(require(obj, "comp_time", where), f"{where}.comp_time", low=0.0)
    success = t - job.submitted_s <= job.deadline_s
    outcome = JobOutcome(job_id, job.tasks, job.deadline_s, comp_time, job.cpus, success)
    cluster.estimator = policy.track_job(
        cluster.estimator, outcome, cluster.capacity, cluster.params
    )
    _count(cluster, "met" if success else "missed")


def _count(cluster: _Cluster, key: str) -> None:
    cluster.counts[key] = cluster.counts.get(key, 0) + 1


def _apply(cluster: _Cluster, decisions: list[Decision]) -> None:
    for d in decisions:
        if d.action == "admit":
            job = cluster.waiting.pop(d.job_id)
            cluster.running[d.job_id] = RunningJob(
                job.id, job.tasks, job.deadline_s, job.submitted_s, d.cpus
            )
        elif d.action == "drop":
            cluster.waiting.pop(d.job_id)
        elif d.action == "kill":
            cluster.running.pop(d.job_id)
        if d.action != "queue":
            _count(cluster, {"admit": "admitted", "drop": "dropped", "kill": "killed"}[d.action])


def _estimator(cluster: _Cluster) -> dict[str, float | None]:
    state = cluster.estimator
    return {
        "min": state.min_frac,
        "max": state.max_frac,
        "last": state.last_frac,
        "fraction": policy.allocation_fraction(state, cluster.params),
    }


def _event(cluster: _Cluster, raw: Any, index: int, last_t: float) -> dict[str, Any]:
    where = f"events[{index}]"
    event = as_mapping(raw, where)
    check_keys(event, ("t", "submit", "complete"), where)
    t = finite_number(require(event, "t", where), f"{where}.t", low=None)
    if t < last_t:
        raise PolicyError(f"{where}.t", f"must not be before the previous event ({last_t:g})")
    kinds = [k for k in ("submit", "complete") if k in event]
    if len(kinds) != 1:
        raise PolicyError(where, "needs exactly one of submit, complete")
    handler = _submit if kinds[0] == "submit" else _complete
    handler(cluster, event[kinds[0]], t, f"{where}.{kinds[0]}")
    decisions = policy.admit(
        cluster.estimator,
        list(cluster.waiting.values()),
        list(cluster.running.values()),
        cluster.free_cpus,
        cluster.capacity,
        t,
        cluster.params,
    )
    _apply(cluster, decisions)
    return {
        "t": t,
        "decisions": [d.to_dict() for d in decisions],
        "estimator": _estimator(cluster),
        "free_cpus": cluster.free_cpus,
    }


def run(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """Replay the events; every error names the offending field."""
    check_keys(scenario, _TOP_KEYS, "")
    params = _params(scenario)
    capacity = _whole(require(scenario, "capacity", ""), "capacity", 1)
    events = as_list(require(scenario, "events", ""), "events")
    cluster = _Cluster(capacity, params)
    out: list[dict[str, Any]] = []
    last_t = float("-inf")
    for index, raw in enumerate(events):
        out.append(_event(cluster, raw, index, last_t))
        last_t = out[-1]["t"]
    summary = {
        k: cluster.counts.get(k, 0) for k in ("admitted", "dropped", "killed", "met", "missed")
    }
    summary["waiting"] = len(cluster.waiting)
    summary["running"] = len(cluster.running)
    return {"events": out, "summary": summary, "state": cluster.estimator.to_dict()}


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def table(result: Mapping[str, Any]) -> str:
    """One line per decision with the numbers behind it, then the estimator after each event."""
    lines = ["t        action  job        cpus  req   fraction  ttd_s     priority  reason"]
    for event in result["events"]:
        for d in event["decisions"]:
            lines.append(
                f"{event['t']:<8g} {d['action']:<7} {d['id']:<10} {d['cpus']:<5} "
                f"{_num(d['req_cpus']):<5} {_num(d['fraction']):<9} {_num(d['ttd_s']):<9} "
                f"{_num(d['priority']):<9} {d['reason']}"
            )
        est = event["estimator"]
        lines.append(
            f"{event['t']:<8g} estimator min={_num(est['min'])} max={_num(est['max'])} "
            f"last={_num(est['last'])} fraction={_num(est['fraction'])} "
            f"free={event['free_cpus']}"
        )
    summary = ", ".join(f"{k}={v}" for k, v in result["summary"].items())
    lines.append(f"summary: {summary}")
    return "\n".join(lines)
