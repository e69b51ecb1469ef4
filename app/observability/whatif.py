"""What-if on the cluster's own history: the applications the sidecar recorded over a period,
replayed in the simulator under another policy, beside what actually happened.

Both sides are measured the same way, so the comparison is fair (thesis seed 004, section 5.4;
Fawkes' per-queue slowdown, seed 000 section 7.3):

* slowdown of a job = (finish - submission) / its ideal runtime on the cluster
  (``work / min(tasks, capacity)``), averaged per queue;
* utilization = vcore-seconds used / (capacity x the period from first submission to last finish);
* deadlines: the recorded apps that were sidecar deadline jobs carry their deadline into the
  replay; "met" is finishing within it.

The replay uses the simulator's public entry points only (``trace.jobs_from_app_records``,
``experiment.run_policy``, ``report.result_plots``).
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from app.db import observe_repo
from app.domain.model import AppRecord
from app.sim import experiment, registry, report, trace
from app.sim.cluster import ClusterSpec
from app.sim.jobs import SimJob, Status
from app.sim.runner import SimResult

Progress = Callable[[int, int], None]
# Nine digits: 999,999,999 weeks is still a 64-bit count of milliseconds, as the database keeps it.
_SINCE = re.compile(r"^(\d{1,9})([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class WhatIfError(ValueError):
    """Bad what-if input; ``field`` names the parameter at fault."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


def parse_since(text: str) -> float:
    """``7d``, ``12h``, ``30m``, ``90s``, ``2w`` as seconds."""
    m = _SINCE.match(text.strip())
    if m is None or int(m.group(1)) <= 0:
        raise WhatIfError("since", f"expected a duration like 7d, 12h or 30m, got {text!r}")
    return int(m.group(1)) * _UNIT_S[m.group(2)]


def since_ms(text: str, until_ms: int) -> int:
    """The start of the period ``text`` (``parse_since``) long that ends at ``until_ms``. A
    period reaching back past the epoch starts there: nothing was recorded earlier, and the
    times before it go past what a date can hold."""
    return max(0, until_ms - int(parse_since(text) * 1000))


@dataclass(frozen=True, slots=True)
class WhatIfSpec:
    """One what-if: the policy to replay under and the recorded period (epoch ms)."""

    policy: str
    since_ms: int | None = None
    until_ms: int | None = None
    capacity_vcores: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    interval_s: float = 60.0

    def validate(self) -> None:
        """``WhatIfError`` naming the field for an unknown policy or an empty period."""
        if self.policy not in registry.policy_names():
            raise WhatIfError(
                "policy",
                f"unknown policy {self.policy!r}; use one of {', '.join(registry.policy_names())}",
            )
        if self.capacity_vcores is not None and self.capacity_vcores < 1:
            raise WhatIfError("capacity_vcores", "must be >= 1")
        if (
            self.since_ms is not None
            and self.until_ms is not None
            and self.since_ms >= self.until_ms
        ):
            raise WhatIfError("since", "must be before until")
        if not self.interval_s > 0:
            raise WhatIfError("interval_s", "must be > 0")


@dataclass(frozen=True, slots=True)
class History:
    """The recorded period as the simulator sees it."""

    jobs: list[SimJob]
    records: dict[str, AppRecord]
    capacity: int
    origin_ms: int


def load_history(session: Session, cluster_name: str, spec: WhatIfSpec) -> History:
    """Finished apps of the period (with deadlines of the sidecar's jobs) and the cluster size."""
    rows = observe_repo.finished_apps(session, cluster_name, spec.since_ms, spec.until_ms)
    records = {r.app_id: r for r in rows}
    base = trace.jobs_from_app_records(rows)
    if not base:
        raise WhatIfError(
            "since", "no finished application with recorded times and vcore-seconds in the period"
        )
    deadlines = observe_repo.job_deadlines(session, [j.job_id for j in base])
    jobs = [j.with_deadline(deadlines[j.job_id]) if j.job_id in deadlines else j for j in base]
    jobs.sort(key=lambda j: (j.submit_s, j.job_id))
    capacity = spec.capacity_vcores or observe_repo.cluster_vcores(session, cluster_name)
    if not capacity:
        capacity = trace.peak_parallelism(jobs)
    origin = min(r.submitted_ms or 0 for r in rows if r.app_id in {j.job_id for j in jobs})
    return History(jobs, records, int(capacity), origin)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def actual_outcome(history: History) -> dict[str, Any]:
    """What happened: per-queue slowdown, deadlines met, utilization, from the recorded times."""
    cap = history.capacity
    slow: dict[str, list[float]] = defaultdict(list)
    met = missed = 0
    first = last = None
    busy = 0.0
    for job in history.jobs:
        rec = history.records[job.job_id]
        assert rec.submitted_ms is not None and rec.finished_ms is not None
        response = (rec.finished_ms - rec.submitted_ms) / 1000
        slow[job.queue].append(response / job.ideal_runtime(cap))
        busy += job.work
        first = job.submit_s if first is None else min(first, job.submit_s)
        end = job.submit_s + response
        last = end if last is None else max(last, end)
        if job.deadline_s is not None:
            ok = rec.final_status == "SUCCEEDED" and response <= job.deadline_s
            met, missed = met + ok, missed + (not ok)
    span = (last or 0.0) - (first or 0.0)
    return {
        "jobs": len(history.jobs),
        "mean_slowdown": {q: sum(v) / len(v) for q, v in sorted(slow.items())},
        "overall_slowdown": _mean([x for v in slow.values() for x in v]),
        "deadlines_met": met,
        "deadlines_missed": missed,
        "utilization": busy / (cap * span) if span > 0 else 0.0,
        "makespan_s": span,
    }


def replay_outcome(result: SimResult) -> dict[str, Any]:
    """The replay measured like ``actual_outcome``."""
    slow: dict[str, list[float]] = defaultdict(list)
    met = missed = 0
    for run in result.runs:
        if run.end_s is not None and run.status in (Status.SUCCEEDED, Status.MISSED):
            slow[run.job.queue].append(
                (run.end_s - run.job.submit_s) / run.job.ideal_runtime(result.capacity)
            )
        if run.job.deadline_s is not None:
            ok = run.status is Status.SUCCEEDED
            met, missed = met + ok, missed + (not ok)
    summary = result.summary()
    return {
        "jobs": len(result.runs),
        "mean_slowdown": {q: sum(v) / len(v) for q, v in sorted(slow.items())},
        "overall_slowdown": _mean([x for v in slow.values() for x in v]),
        "deadlines_met": met,
        "deadlines_missed": missed,
        "utilization": summary["utilization"],
        "makespan_s": summary["makespan_s"],
        "dropped": summary["dropped"],
        "killed": summary["killed"],
    }


@dataclass(slots=True)
class WhatIfResult:
    """The comparison, and the replay itself for the report's plots."""

    spec: WhatIfSpec
    history: History
    actual: dict[str, Any]
    replay: dict[str, Any]
    result: SimResult

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the API's and ``--out``'s ``summary.json``)."""
        queues = sorted(set(self.actual["mean_slowdown"]) | set(self.replay["mean_slowdown"]))
        return {
            "policy": self.spec.policy,
            "params": dict(self.spec.params),
            "since": _iso(self.spec.since_ms),
            "until": _iso(self.spec.until_ms),
            "capacity_vcores": self.history.capacity,
            "jobs": len(self.history.jobs),
            "queues": [
                {
                    "queue": q,
                    "actual_slowdown": self.actual["mean_slowdown"].get(q),
                    "replay_slowdown": self.replay["mean_slowdown"].get(q),
                }
                for q in queues
            ],
            "actual": self.actual,
            "replay": self.replay,
        }


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat()


def run(history: History, spec: WhatIfSpec, progress: Progress | None = None) -> WhatIfResult:
    """Replay ``history`` under ``spec.policy``."""
    spec.validate()
    if registry.needs_deadlines(spec.policy) and any(j.deadline_s is None for j in history.jobs):
        raise WhatIfError(
            "policy",
            f"{spec.policy} needs a deadline per job; the period has apps that were not "
            "submitted as deadline jobs (choose a queue policy, e.g. fair, ltrf, fawkes:TD)",
        )
    try:
        result = experiment.run_policy(
            spec.policy,
            history.jobs,
            ClusterSpec(history.capacity),
            dict(spec.params),
            interval_s=spec.interval_s,
            progress=progress,
            start_s=history.jobs[0].submit_s,
        )
    except ValueError as exc:  # a bad policy parameter
        raise WhatIfError("params", str(exc)) from exc
    return WhatIfResult(spec, history, actual_outcome(history), replay_outcome(result), result)


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3f}"
    return html.escape(str(v))


def html_report(outcome: WhatIfResult, plots: bool = True) -> str:
    """A self-contained HTML page: the comparison tables and the replay's plots (inline PNG)."""
    d = outcome.to_dict()
    a, r = d["actual"], d["replay"]
    rows = "".join(
        f"<tr><td>{html.escape(q['queue'])}</td><td>{_fmt(q['actual_slowdown'])}</td>"
        f"<td>{_fmt(q['replay_slowdown'])}</td></tr>"
        for q in d["queues"]
    )
    head = [
        ("mean slowdown (all jobs)", a["overall_slowdown"], r["overall_slowdown"]),
        ("deadlines met", a["deadlines_met"], r["deadlines_met"]),
        ("deadlines missed", a["deadlines_missed"], r["deadlines_missed"]),
        ("utilization", a["utilization"], r["utilization"]),
        ("makespan (s)", a["makespan_s"], r["makespan_s"]),
    ]
    totals = "".join(
        f"<tr><td>{name}</td><td>{_fmt(x)}</td><td>{_fmt(y)}</td></tr>" for name, x, y in head
    )
    images = ""
    if plots:
        for name, png in report.result_plots(outcome.result).items():
            data = base64.b64encode(png).decode("ascii")
            images += f"<h3>{html.escape(name)}</h3><img alt='{html.escape(name)}' "
            images += f"src='data:image/png;base64,{data}' style='max-width:100%'>"
    policy = html.escape(d["policy"])
    period = f"{_fmt(d['since'] or 'the beginning')} – {_fmt(d['until'] or 'now')}"
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>What-if: {policy}</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .7em;"
        "text-align:right}td:first-child,th:first-child{text-align:left}</style></head><body>"
        f"<h1>What-if: the recorded period under {policy}</h1>"
        f"<p>Period {period}; {d['jobs']} finished applications; cluster of "
        f"{d['capacity_vcores']} vcores. Slowdown = response time / ideal runtime on the "
        "cluster; lower is better.</p>"
        "<table><tr><th></th><th>actual</th><th>replay</th></tr>"
        f"{totals}</table><h2>Per-queue mean slowdown</h2>"
        "<table><tr><th>queue</th><th>actual</th><th>replay</th></tr>"
        f"{rows}</table>{images}</body></html>"
    )
