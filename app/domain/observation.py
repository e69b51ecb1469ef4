"""Policy inputs from the poller's samples (``docs/policies.md``, "Fawkes
weights": "over the last interval T, the controller averages samples").

Pure: the service layer (``app.services.policy_inputs``) reads the rows and hands them here.

Decisions where the docs are silent:

* An interval average is the plain mean of the samples taken in ``(now - T, now]``; the poller
  samples at a fixed rate, so this equals the time average up to the edges.
* ``used_fraction`` (Fawkes' ``c_i``) is the queue's dominant share of the cluster per sample,
  ``max(used vcores / cluster vcores, used MB / cluster MB)``, capped at 1, then averaged; this is
  how the CapacityScheduler's DominantResourceCalculator measures it.
* Utilisation of the queue's own capacity (``PU``, ``DU``) divides the averaged used vcores (MB) by
  the vcores (MB) of its average absolute capacity, capped at 1 (a queue borrowing beyond its
  capacity uses all of it; the simulator measures it the same way); capacity 0 reports 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SamplePoint:
    """One queue at one poll (a ``queue_samples`` row, as plain numbers)."""

    taken_ms: int
    used_vcores: float = 0.0
    used_memory_mb: float = 0.0
    pending_vcores: float = 0.0
    pending_memory_mb: float = 0.0
    pending_containers: float = 0.0
    pending_apps: float = 0.0
    running_apps: float = 0.0
    absolute_capacity: float = 0.0  # percent of the cluster


@dataclass(frozen=True, slots=True)
class ClusterTotals:
    """Resources of the running NodeManagers at one poll."""

    vcores: float
    memory_mb: float


@dataclass(frozen=True, slots=True)
class QueueInputs:
    """One queue's averages over the interval, plus apps completed in it."""

    samples: int
    used_vcores: float
    used_memory_mb: float
    pending_vcores: float
    pending_memory_mb: float
    pending_containers: float
    pending_apps: float
    running_apps: float
    used_fraction: float
    vcore_utilization: float
    memory_utilization: float
    completed_apps: int
    # What the RM's REST API does not report (Fawkes' DD, TT and JS): 0 or empty in the live
    # controller until a job history source provides them; the simulator knows them.
    waiting_input_bytes: float = 0.0
    completed_tasks: float = 0.0
    slowdowns: tuple[float, ...] = ()

    @property
    def demand_vcores(self) -> float:
        """What the queue would use if given it: used plus pending vcores."""
        return self.used_vcores + self.pending_vcores

    @property
    def demand_memory_mb(self) -> float:
        """Used plus pending MB."""
        return self.used_memory_mb + self.pending_memory_mb

    def to_dict(self) -> dict[str, Any]:
        """JSON form for the audit trail."""
        out = asdict(self)
        out["slowdowns"] = list(self.slowdowns)
        return out


@dataclass(frozen=True, slots=True)
class PolicyInputs:
    """What a queue policy sees at one tick."""

    now_ms: int
    window_start_ms: int
    interval_s: float
    total: ClusterTotals
    queues: Mapping[str, QueueInputs]

    def to_dict(self) -> dict[str, Any]:
        """JSON form for the audit trail."""
        return {
            "now_ms": self.now_ms,
            "window_start_ms": self.window_start_ms,
            "interval_s": self.interval_s,
            "cluster": {"vcores": self.total.vcores, "memory_mb": self.total.memory_mb},
            "queues": {q: v.to_dict() for q, v in sorted(self.queues.items())},
        }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def dominant_share(point: SamplePoint, total: ClusterTotals) -> float:
    """The queue's largest fraction of any cluster resource at one sample, capped at 1."""
    shares = [
        point.used_vcores / total.vcores if total.vcores > 0 else 0.0,
        point.used_memory_mb / total.memory_mb if total.memory_mb > 0 else 0.0,
    ]
    return min(1.0, max(shares))


def average(points: Sequence[SamplePoint], total: ClusterTotals, completed: int) -> QueueInputs:
    """The interval averages of one queue's samples (all zero when it has none)."""
    used_v = _mean([p.used_vcores for p in points])
    used_m = _mean([p.used_memory_mb for p in points])
    cap = _mean([p.absolute_capacity for p in points]) / 100
    cap_v, cap_m = cap * total.vcores, cap * total.memory_mb
    return QueueInputs(
        samples=len(points),
        used_vcores=used_v,
        used_memory_mb=used_m,
        pending_vcores=_mean([p.pending_vcores for p in points]),
        pending_memory_mb=_mean([p.pending_memory_mb for p in points]),
        pending_containers=_mean([p.pending_containers for p in points]),
        pending_apps=_mean([p.pending_apps for p in points]),
        running_apps=_mean([p.running_apps for p in points]),
        used_fraction=_mean([dominant_share(p, total) for p in points]),
        vcore_utilization=min(1.0, used_v / cap_v) if cap_v > 0 else 0.0,
        memory_utilization=min(1.0, used_m / cap_m) if cap_m > 0 else 0.0,
        completed_apps=completed,
    )


def build_inputs(
    now_ms: int,
    interval_s: float,
    queues: Sequence[str],
    points: Mapping[str, Sequence[SamplePoint]],
    total: ClusterTotals,
    completed: Mapping[str, int],
) -> PolicyInputs:
    """Averages for every managed queue (a queue without samples averages to 0)."""
    return PolicyInputs(
        now_ms=now_ms,
        window_start_ms=now_ms - int(interval_s * 1000),
        interval_s=interval_s,
        total=total,
        queues={q: average(points.get(q, ()), total, completed.get(q, 0)) for q in queues},
    )


@dataclass(frozen=True, slots=True)
class Cursors:
    """Where a tick's counts of completions stopped; the next tick counts from there."""

    # the poll up to which completed applications were counted (``final_seen_ms``)
    apps_seen_ms: int | None = None
    # the MapReduce history ``seq`` up to which completed tasks were counted
    history_seq: int | None = None

    def to_dict(self) -> dict[str, int | None]:
        """JSON form (stored as the controller's state between ticks)."""
        return {"apps_seen_ms": self.apps_seen_ms, "history_seq": self.history_seq}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cursors:
        """From ``to_dict`` (missing keys: no cursor)."""
        apps, seq = data.get("apps_seen_ms"), data.get("history_seq")
        return cls(int(apps) if apps is not None else None, int(seq) if seq is not None else None)
