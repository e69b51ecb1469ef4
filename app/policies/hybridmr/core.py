"""HybridMR: placement of MapReduce jobs on a native or a virtual partition, and interference
arbitration on the virtual one (seed 001, Sharma et al., section III).

- ``ProfileDB`` / ``estimate``: the Phase I job profiling database and Algorithm 1 (III-A1). A
  profile row is one completed job: class, partition, input size, cluster size, map, reduce and
  end-to-end time. Rules, in Algorithm 1's order: ``exact`` (lines 2-3), ``data_size`` (lines 5-6,
  the same cluster size at other input sizes), ``cluster_size`` (lines 7-8, the same input size at
  other cluster sizes: separate map and reduce extrapolation) and ``data_then_cluster`` (III-A1's
  training cluster, see below). Every ``Estimate`` names its rule, the rows it used and the
  arithmetic, or says why there is none.
- ``place``: Algorithm 2 (III-A2). Transactional jobs go to the virtual partition; a batch job goes
  to the native partition when ``JCT_estimated >= JCT_desired`` and to the virtual one otherwise.
- ``detect`` / ``arbitrate``: Phase II, the IPS and Algorithm 3 (III-B2): batch tasks collocated
  with an interactive application outside its SLA are moved to the best-fit node, least
  interfering first (Min-Min); a task that fits nowhere is throttled.

Decisions where the paper is ambiguous or silent:

* Rows with the same class, partition, input and cluster size are averaged ("averaged across 3
  runs", III-A1). Sizes match exactly (bytes and nodes or vcores are whole numbers in practice).
  An estimate only uses rows of the partition it is asked about: virtualisation overhead is what
  the two partitions differ in (section II).
* ``data_size`` (Fig. 5(d): JCT "almost linearly proportional to the input data size"): with one
  profiled input size the time scales in proportion to the input; with two or more, linear
  interpolation between the two profiled sizes around the query, and extrapolation along the
  nearest end segment outside them. Map, reduce and total are each extrapolated this way; the
  result is clamped at 0. Through the profiled points, so it agrees with ``exact`` there.
* ``cluster_size`` (Fig. 5(a)-(c)): the map phase follows the inverse relation ``map ~ 1/c``:
  linear in ``1/c`` between the two profiled sizes around the query, ``map_end * c_end / c``
  outside them. The reduce phase is "piecewise non-linear" and "highly erratic": linear
  interpolation in ``c`` between neighbours, and the nearest profiled value outside (no trend is
  extrapolated from erratic data). ``JCT_estimated = map + reduce`` ("separate Map and Reduce
  phase based extrapolation to get JCT_estimated", Algorithm 1 line 8).
* ``data_then_cluster``: III-A1 runs a new job "on a representative small cluster and with a
  smaller data set" and extrapolates "to the full cluster and data set", which neither branch of
  Algorithm 1 covers alone. With ``combine`` (default true), when the query's cluster size was
  never profiled, every profiled cluster size contributes one point at the query's input size (its
  rows when that size was profiled there, the ``data_size`` rule otherwise) and the
  ``cluster_size`` rule runs over those points; the rule is called ``cluster_size`` when every
  point was profiled, ``data_then_cluster`` otherwise. With ``combine`` false this is Algorithm 1
  verbatim: only cluster sizes profiled at exactly the query's input size, else no estimate. With
  ``combine`` the estimate is non-decreasing in the input size whenever every cluster size's
  profile is (every step uses non-negative weights).
* Algorithm 2 compares the estimate *on the virtual partition* (at its cluster size) with the
  desired time, so "native when the virtual partition would miss the desired time"; equality goes
  native (line 6 is ``>=``). The native-partition estimate is reported for audit only. A batch
  job with no virtual estimate goes where ``unknown_placement`` says (default native: without
  evidence that virtualisation is harmless, the paper's default home of batch work, section I).
* Phase II: an interactive application violates its SLA when its metric (a response time, higher
  is worse) exceeds the threshold (Fig. 9(a)). ``TASK_LIST_interference`` is every batch task on a
  node hosting a violating application. Destinations (``AvailableVMs``) are nodes hosting no
  violating application whose free vcores (capacity minus interactive and batch load) fit the
  task; BestFit picks the one with the least vcores left after the move (ties by node id).
  Min-Min takes tasks in ascending estimated interference (ties by task id). A task that fits
  nowhere is throttled to ``throttle_share`` of its allocation (0 = paused; III-B: the VM's share
  "decreased" or "paused"; IV: "migrate or pause").
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.policies.base import ParamSpec, PolicyError, PolicySpec
from app.policies.base import finite_number as _number

PARTITIONS: tuple[str, str] = ("native", "virtual")
WORKLOADS: tuple[str, str] = ("batch", "transactional")
_FIT_SLACK = 1e-9  # float slack when comparing vcores sums

# ---------------------------------------------------------------- parameters

_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "unknown_placement",
        str,
        "native",
        "partition for a batch job with no virtual-partition estimate",
        choices=PARTITIONS,
    ),
    ParamSpec(
        "combine",
        bool,
        True,
        "extrapolate on input size, then cluster size, when neither matches (III-A1 training)",
    ),
    ParamSpec(
        "throttle_share",
        float,
        0.0,
        "fraction of its allocation a throttled batch task keeps (0 = paused)",
        minimum=0.0,
        maximum=1.0,
        exclusive_maximum=True,
    ),
)

REGISTRY: tuple[PolicySpec, ...] = (
    PolicySpec(
        name="hybridmr",
        kind="placement",
        summary="HybridMR: place batch jobs on the native or virtual partition from profiled "
        "completion times; move or throttle batch tasks that hurt interactive SLAs.",
        paper="seed 001 (Sharma et al., HybridMR), section III (Algorithms 1, 2 and 3)",
        params=_PARAMS,
    ),
)


@dataclass(frozen=True, slots=True)
class HybridParams:
    """Validated parameters; build from a plain mapping with ``make_params``."""

    unknown_placement: str = "native"
    combine: bool = True
    throttle_share: float = 0.0

    def __post_init__(self) -> None:
        for spec in _PARAMS:
            spec.validate(getattr(self, spec.name))


def make_params(values: Mapping[str, Any] | None = None) -> HybridParams:
    """Registry defaults overlaid with ``values``; errors name the parameter."""
    return HybridParams(**REGISTRY[0].validate(values or {}))


# ---------------------------------------------------------------- validation helpers


def _choice(value: Any, where: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise PolicyError(where, f"must be one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise PolicyError(where, f"must be a non-empty string, got {value!r}")
    return value


# ---------------------------------------------------------------- profile database (Phase I)


@dataclass(frozen=True, slots=True)
class Observation:
    """One profiled run: completion times by phase for an input size on a cluster size."""

    job_class: str
    partition: str
    input_bytes: float
    cluster_size: float
    map_s: float
    reduce_s: float
    total_s: float

    def __post_init__(self) -> None:
        _name(self.job_class, "job_class")
        _choice(self.partition, "partition", PARTITIONS)
        _number(self.input_bytes, "input_bytes", positive=True)
        _number(self.cluster_size, "cluster_size", positive=True)
        for name in ("map_s", "reduce_s", "total_s"):
            _number(getattr(self, name), name)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "job_class": self.job_class,
            "partition": self.partition,
            "input_bytes": float(self.input_bytes),
            "cluster_size": float(self.cluster_size),
            "map_s": float(self.map_s),
            "reduce_s": float(self.reduce_s),
            "total_s": float(self.total_s),
        }


_OBS_KEYS = (
    "job_class",
    "partition",
    "input_bytes",
    "cluster_size",
    "map_s",
    "reduce_s",
    "total_s",
)


def _observation(data: Any, where: str) -> Observation:
    if not isinstance(data, Mapping):
        raise PolicyError(where, "must be an object")
    for key in data:
        if key not in _OBS_KEYS:
            raise PolicyError(f"{where}.{key}", "unknown field of a profile row")
    for key in _OBS_KEYS:
        if key not in data:
            raise PolicyError(f"{where}.{key}", "is required")
    try:
        return Observation(**{k: data[k] for k in _OBS_KEYS})
    except PolicyError as exc:
        raise PolicyError(f"{where}.{exc.field}", exc.message) from exc


@dataclass(frozen=True, slots=True)
class ProfileDB:
    """``DB_profile``: the historic observations, in insertion order (indices are audit ids)."""

    observations: tuple[Observation, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"observations": [row, ...]}``."""
        return {"observations": [o.to_dict() for o in self.observations]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProfileDB:
        """Inverse of ``to_dict``; errors name ``observations[k].field``."""
        rows = data.get("observations", [])
        if not isinstance(rows, list):
            raise PolicyError("observations", "must be a list")
        return cls(tuple(_observation(r, f"observations[{k}]") for k, r in enumerate(rows)))

    def add(self, observation: Observation) -> ProfileDB:
        """A new database with one more observation (the profile grows as jobs complete)."""
        return ProfileDB((*self.observations, observation))


@dataclass(frozen=True, slots=True)
class _Point:
    """Mean phase times at one profiled size; ``rows`` are observation indices."""

    x: float
    map_s: float
    reduce_s: float
    total_s: float
    rows: tuple[int, ...]
    profiled: bool = True


def _mean_point(x: float, rows: Sequence[tuple[int, Observation]]) -> _Point:
    n = len(rows)
    return _Point(
        x=x,
        map_s=sum(o.map_s for _, o in rows) / n,
        reduce_s=sum(o.reduce_s for _, o in rows) / n,
        total_s=sum(o.total_s for _, o in rows) / n,
        rows=tuple(k for k, _ in rows),
    )


def _points(
    rows: Iterable[tuple[int, Observation]], key: Callable[[Observation], float]
) -> list[_Point]:
    """Rows grouped by ``key`` (averaged), sorted by it."""
    groups: dict[float, list[tuple[int, Observation]]] = {}
    for k, o in rows:
        groups.setdefault(key(o), []).append((k, o))
    return [_mean_point(x, groups[x]) for x in sorted(groups)]


# ---------------------------------------------------------------- interpolation primitives


def _segment(xs: Sequence[float], x: float) -> tuple[int, int]:
    """Indices of the two profiled sizes around ``x``, or of the nearest end pair outside."""
    i = bisect.bisect_left(xs, x)
    i = min(max(i, 1), len(xs) - 1)
    return i - 1, i


def _line(x: float, xa: float, va: float, xb: float, vb: float) -> float:
    return va + (vb - va) * (x - xa) / (xb - xa)


def _linear(xs: Sequence[float], vs: Sequence[float], x: float) -> float:
    """Proportional through the origin for one point; piecewise linear otherwise; >= 0."""
    if len(xs) == 1:
        return vs[0] * x / xs[0]
    a, b = _segment(xs, x)
    return max(0.0, _line(x, xs[a], vs[a], xs[b], vs[b]))


def _inverse(cs: Sequence[float], vs: Sequence[float], c: float) -> float:
    """Map phase vs cluster size: linear in 1/c inside, ``v_end * c_end / c`` outside."""
    if c <= cs[0]:
        return vs[0] * cs[0] / c
    if c >= cs[-1]:
        return vs[-1] * cs[-1] / c
    a, b = _segment(cs, c)
    return _line(1 / c, 1 / cs[a], vs[a], 1 / cs[b], vs[b])


def _piecewise_flat(cs: Sequence[float], vs: Sequence[float], c: float) -> float:
    """Reduce phase vs cluster size: linear between neighbours, nearest value outside."""
    if c <= cs[0]:
        return vs[0]
    if c >= cs[-1]:
        return vs[-1]
    a, b = _segment(cs, c)
    return _line(c, cs[a], vs[a], cs[b], vs[b])


# ---------------------------------------------------------------- Algorithm 1


@dataclass(frozen=True, slots=True)
class Estimate:
    """``JCT_estimated`` with the rule and rows that produced it (``rule`` None: no estimate)."""

    job_class: str
    partition: str
    input_bytes: float
    cluster_size: float
    rule: str | None
    map_s: float | None
    reduce_s: float | None
    total_s: float | None
    basis: tuple[int, ...]
    reason: str

    @property
    def ok(self) -> bool:
        """An estimate was produced."""
        return self.total_s is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "job_class": self.job_class,
            "partition": self.partition,
            "input_bytes": self.input_bytes,
            "cluster_size": self.cluster_size,
            "rule": self.rule,
            "map_s": self.map_s,
            "reduce_s": self.reduce_s,
            "total_s": self.total_s,
            "basis": list(self.basis),
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class _Query:
    job_class: str
    partition: str
    input_bytes: float
    cluster_size: float

    def result(self, rule: str, point: _Point, basis: Iterable[int], reason: str) -> Estimate:
        return Estimate(
            self.job_class,
            self.partition,
            self.input_bytes,
            self.cluster_size,
            rule,
            point.map_s,
            point.reduce_s,
            point.total_s,
            tuple(sorted(set(basis))),
            reason,
        )

    def none(self, reason: str) -> Estimate:
        return Estimate(
            self.job_class,
            self.partition,
            self.input_bytes,
            self.cluster_size,
            None,
            None,
            None,
            None,
            (),
            reason,
        )


def _g(value: float) -> str:
    return f"{value:.6g}"


def _data_size(points: Sequence[_Point], d: float) -> tuple[_Point, str]:
    """The ``data_size`` rule over points keyed by input size (one cluster size)."""
    xs = [p.x for p in points]
    vals = {
        name: _linear(xs, [getattr(p, name) for p in points], d)
        for name in ("map_s", "reduce_s", "total_s")
    }
    rows = tuple(k for p in points for k in p.rows)
    if len(points) == 1:
        how = f"proportional to input size from {_g(xs[0])} B ({_g(points[0].total_s)} s)"
        return _Point(d, rows=rows, profiled=False, **vals), how
    a, b = _segment(xs, d)
    kind = "interpolated" if xs[0] <= d <= xs[-1] else "extrapolated"
    how = (
        f"{kind} linearly in input size through {_g(xs[a])} B ({_g(points[a].total_s)} s) "
        f"and {_g(xs[b])} B ({_g(points[b].total_s)} s)"
    )
    used = points[a].rows + points[b].rows
    return _Point(d, rows=used, profiled=False, **vals), how


def _cluster_size(points: Sequence[_Point], c: float) -> tuple[_Point, tuple[_Point, ...], str]:
    """The ``cluster_size`` rule over points keyed by cluster size (one input size); returns the
    estimate, the points it used and how."""
    cs = [p.x for p in points]
    map_s = _inverse(cs, [p.map_s for p in points], c)
    reduce_s = _piecewise_flat(cs, [p.reduce_s for p in points], c)
    if c < cs[0] or c > cs[-1] or len(cs) == 1:
        end = points[0] if c < cs[0] else points[-1]
        used: tuple[_Point, ...] = (end,)
        how = (
            f"map {_g(end.map_s)} s x {_g(end.x)} / {_g(c)} (inverse in cluster size), "
            f"reduce held at {_g(end.reduce_s)} s of cluster size {_g(end.x)}"
        )
    else:
        a, b = _segment(cs, c)
        used = (points[a], points[b])
        how = (
            f"map linear in 1/cluster size, reduce linear in cluster size, between cluster "
            f"sizes {_g(cs[a])} and {_g(cs[b])}"
        )
    rows = tuple(k for p in used for k in p.rows)
    return _Point(c, map_s, reduce_s, map_s + reduce_s, rows, profiled=False), used, how


def estimate(
    db: ProfileDB,
    job_class: str,
    input_bytes: float,
    cluster_size: float,
    partition: str = "virtual",
    params: HybridParams | None = None,
) -> Estimate:
    """Algorithm 1: the estimated completion time of ``job_class`` on ``input_bytes`` with
    ``cluster_size`` nodes (or vcores) of ``partition``."""
    q = _Query(
        _name(job_class, "job_class"),
        _choice(partition, "partition", PARTITIONS),
        _number(input_bytes, "input_bytes", positive=True),
        _number(cluster_size, "cluster_size", positive=True),
    )
    combine = (params or HybridParams()).combine
    rows = [
        (k, o)
        for k, o in enumerate(db.observations)
        if o.job_class == q.job_class and o.partition == q.partition
    ]
    if not rows:
        return q.none(f"no profile of {q.job_class!r} on the {q.partition} partition")
    same_c = [(k, o) for k, o in rows if o.cluster_size == q.cluster_size]
    if same_c:
        return _at_profiled_cluster(q, same_c)
    return _across_clusters(q, rows, combine)


def _at_profiled_cluster(q: _Query, same_c: Sequence[tuple[int, Observation]]) -> Estimate:
    """Algorithm 1 lines 2-6: exact lookup, else linear in input size at this cluster size."""
    points = _points(same_c, lambda o: o.input_bytes)
    for p in points:
        if p.x == q.input_bytes:
            runs = len(p.rows)
            why = f"exact: mean of {runs} profiled run{'s' if runs > 1 else ''}"
            return q.result("exact", p, p.rows, why)
    point, how = _data_size(points, q.input_bytes)
    return q.result("data_size", point, point.rows, f"data_size: {how}")


def _across_clusters(q: _Query, rows: Sequence[tuple[int, Observation]], combine: bool) -> Estimate:
    """Algorithm 1 lines 7-8 (and III-A1's training extrapolation when ``combine``)."""
    by_c: dict[float, list[tuple[int, Observation]]] = {}
    for k, o in rows:
        by_c.setdefault(o.cluster_size, []).append((k, o))
    points: list[_Point] = []
    for c in sorted(by_c):
        at_c = _points(by_c[c], lambda o: o.input_bytes)
        hit = next((p for p in at_c if p.x == q.input_bytes), None)
        if hit is not None:
            points.append(_Point(c, hit.map_s, hit.reduce_s, hit.total_s, hit.rows))
        elif combine:
            synth, _ = _data_size(at_c, q.input_bytes)
            points.append(_Point(c, synth.map_s, synth.reduce_s, synth.total_s, synth.rows, False))
    if not points:
        return q.none(
            f"no profile at cluster size {_g(q.cluster_size)} nor at input size "
            f"{_g(q.input_bytes)} B (Algorithm 1 has nothing to extrapolate from; "
            "combine is off)"
        )
    point, used, how = _cluster_size(points, q.cluster_size)
    synthetic = [p for p in used if not p.profiled]
    if not synthetic:
        return q.result("cluster_size", point, point.rows, f"cluster_size: {how}")
    sizes = ", ".join(_g(p.x) for p in synthetic)
    why = f"data_then_cluster: input size extrapolated at cluster size(s) {sizes}, then {how}"
    return q.result("data_then_cluster", point, point.rows, why)


# ---------------------------------------------------------------- Algorithm 2


@dataclass(frozen=True, slots=True)
class Job:
    """A submitted job: its profile class, input size and workload type (Algorithm 2)."""

    id: str
    job_class: str
    input_bytes: float
    workload: str = "batch"

    def __post_init__(self) -> None:
        _name(self.id, "id")
        _name(self.job_class, "job_class")
        _number(self.input_bytes, "input_bytes", positive=True)
        _choice(self.workload, "workload", WORKLOADS)


@dataclass(frozen=True, slots=True)
class Partitions:
    """Cluster size (nodes or vcores) of ``P_CLUSTER`` and ``V_CLUSTER``."""

    native_size: float
    virtual_size: float

    def __post_init__(self) -> None:
        _number(self.native_size, "partitions.native", positive=True)
        _number(self.virtual_size, "partitions.virtual", positive=True)


@dataclass(frozen=True, slots=True)
class Placement:
    """Algorithm 2's decision for one job, with the numbers behind it."""

    job_id: str
    workload: str
    partition: str
    desired_s: float | None
    estimate: Estimate | None
    native_estimate: Estimate | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "id": self.job_id,
            "workload": self.workload,
            "partition": self.partition,
            "desired_s": self.desired_s,
            "estimated_s": None if self.estimate is None else self.estimate.total_s,
            "native_estimated_s": (
                None if self.native_estimate is None else self.native_estimate.total_s
            ),
            "estimate": None if self.estimate is None else self.estimate.to_dict(),
            "native_estimate": (
                None if self.native_estimate is None else self.native_estimate.to_dict()
            ),
            "reason": self.reason,
        }


def place(
    job: Job,
    db: ProfileDB,
    partitions: Partitions,
    desired_completion_s: float | None,
    params: HybridParams | None = None,
) -> Placement:
    """Algorithm 2 for one job: virtual for transactional work; for batch work, native exactly
    when the virtual-partition estimate is at least the desired completion time."""
    p = params or HybridParams()
    desired = (
        None
        if desired_completion_s is None
        else _number(desired_completion_s, "desired_completion_s", positive=True)
    )
    if job.workload == "transactional":
        why = "transactional workloads run on the virtual partition (Algorithm 2 lines 2-3)"
        return Placement(job.id, job.workload, "virtual", desired, None, None, why)
    if desired is None:
        raise PolicyError("desired_completion_s", "a batch job needs a desired completion time")
    virtual = estimate(db, job.job_class, job.input_bytes, partitions.virtual_size, "virtual", p)
    native = estimate(db, job.job_class, job.input_bytes, partitions.native_size, "native", p)
    partition, why = _compare(virtual, desired, p)
    return Placement(job.id, job.workload, partition, desired, virtual, native, why)


def _compare(virtual: Estimate, desired: float, params: HybridParams) -> tuple[str, str]:
    if virtual.total_s is None:
        why = (
            f"no virtual-partition estimate ({virtual.reason}); "
            f"unknown_placement = {params.unknown_placement}"
        )
        return params.unknown_placement, why
    est = virtual.total_s
    if est >= desired:
        return "native", (
            f"virtual estimate {_g(est)} s >= desired {_g(desired)} s "
            f"({virtual.rule}): the virtual partition would miss it"
        )
    return "virtual", (
        f"virtual estimate {_g(est)} s < desired {_g(desired)} s ({virtual.rule}): "
        "the virtual partition meets it"
    )


def place_all(
    jobs: Sequence[tuple[Job, float | None]],
    db: ProfileDB,
    partitions: Partitions,
    params: HybridParams | None = None,
) -> list[Placement]:
    """Algorithm 2 over the queue ``Q`` in order; each job with its desired completion time."""
    return [place(job, db, partitions, desired, params) for job, desired in jobs]


# ---------------------------------------------------------------- Phase II (Algorithm 3)


@dataclass(frozen=True, slots=True)
class InteractiveApp:
    """An interactive application on a virtual node: its SLA metric (higher is worse) and bound."""

    id: str
    node: str
    metric: float
    sla: float

    def __post_init__(self) -> None:
        _name(self.id, "id")
        _name(self.node, "node")
        _number(self.metric, "metric")
        _number(self.sla, "sla", positive=True)

    @property
    def violated(self) -> bool:
        """Outside its SLA bound (strictly above the threshold)."""
        return self.metric > self.sla


@dataclass(frozen=True, slots=True)
class BatchTask:
    """A running map or reduce task: its node, vcores and estimated interference (DRM model)."""

    id: str
    job_id: str
    node: str
    vcores: float
    interference: float

    def __post_init__(self) -> None:
        _name(self.id, "id")
        _name(self.job_id, "job_id")
        _name(self.node, "node")
        _number(self.vcores, "vcores")
        _number(self.interference, "interference")


@dataclass(frozen=True, slots=True)
class Node:
    """A virtual node (VM): vcore capacity and the vcores its interactive applications use."""

    id: str
    capacity: float
    interactive_load: float = 0.0

    def __post_init__(self) -> None:
        _name(self.id, "id")
        _number(self.capacity, "capacity")
        _number(self.interactive_load, "interactive_load")


@dataclass(frozen=True, slots=True)
class Violation:
    """An interactive application outside its SLA (the IPS trigger)."""

    app_id: str
    node: str
    metric: float
    sla: float

    def to_dict(self) -> dict[str, Any]:
        """JSON form with the excess over the bound."""
        return {
            "app": self.app_id,
            "node": self.node,
            "metric": float(self.metric),
            "sla": float(self.sla),
            "excess": float(self.metric - self.sla),
        }


@dataclass(frozen=True, slots=True)
class Action:
    """Move a batch task to ``to_node`` or throttle it to ``share`` of its allocation."""

    kind: str  # "move" | "throttle"
    task_id: str
    job_id: str
    from_node: str
    to_node: str | None
    share: float | None
    interference: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "action": self.kind,
            "task": self.task_id,
            "job": self.job_id,
            "from": self.from_node,
            "to": self.to_node,
            "share": None if self.share is None else float(self.share),
            "interference": float(self.interference),
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class Arbitration:
    """Algorithm 3's outcome: violations, actions in decision order, free vcores afterwards."""

    violations: tuple[Violation, ...]
    actions: tuple[Action, ...]
    free_after: Mapping[str, float]

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "violations": [v.to_dict() for v in self.violations],
            "actions": [a.to_dict() for a in self.actions],
            "free_after": {n: float(v) for n, v in self.free_after.items()},
        }


def detect(apps: Iterable[InteractiveApp]) -> list[Violation]:
    """The IPS check: applications whose metric exceeds their SLA bound, by node then id."""
    out = [Violation(a.id, a.node, a.metric, a.sla) for a in apps if a.violated]
    return sorted(out, key=lambda v: (v.node, v.app_id))


def _free_vcores(nodes: Sequence[Node], tasks: Sequence[BatchTask]) -> dict[str, float]:
    free = {n.id: n.capacity - n.interactive_load for n in nodes}
    for t in tasks:
        free[t.node] -= t.vcores
    return free


def _check_topology(
    apps: Sequence[InteractiveApp], tasks: Sequence[BatchTask], nodes: Sequence[Node]
) -> None:
    known: set[str] = set()
    for k, n in enumerate(nodes):
        if n.id in known:
            raise PolicyError(f"nodes[{k}].id", f"node {n.id!r} appears twice")
        known.add(n.id)
    where = [(f"apps[{k}].node", a.node) for k, a in enumerate(apps)]
    where += [(f"tasks[{k}].node", t.node) for k, t in enumerate(tasks)]
    for field, node in where:
        if node not in known:
            raise PolicyError(field, f"unknown node {node!r}")
    seen: set[str] = set()
    for k, task in enumerate(tasks):
        if task.id in seen:
            raise PolicyError(f"tasks[{k}].id", f"task {task.id!r} appears twice")
        seen.add(task.id)


def _best_fit(free: Mapping[str, float], allowed: Iterable[str], vcores: float) -> str | None:
    """BestFit: the allowed node left with the fewest free vcores after taking the task."""
    fits = [(free[n] - vcores, n) for n in allowed if free[n] - vcores >= -_FIT_SLACK]
    return min(fits)[1] if fits else None


def arbitrate(
    apps: Sequence[InteractiveApp],
    tasks: Sequence[BatchTask],
    nodes: Sequence[Node],
    params: HybridParams | None = None,
) -> Arbitration:
    """Algorithm 3: relieve every node whose interactive application violates its SLA."""
    p = params or HybridParams()
    _check_topology(apps, tasks, nodes)
    violations = detect(apps)
    hot = {v.node for v in violations}
    free = _free_vcores(nodes, tasks)
    targets = sorted(n.id for n in nodes if n.id not in hot)
    interfering = sorted((t for t in tasks if t.node in hot), key=lambda t: (t.interference, t.id))
    actions: list[Action] = []
    for task in interfering:
        dest = _best_fit(free, targets, task.vcores)
        if dest is None:
            free[task.node] += task.vcores * (1 - p.throttle_share)
            actions.append(_throttle(task, p.throttle_share))
            continue
        free[dest] -= task.vcores
        free[task.node] += task.vcores
        why = (
            f"on {task.node} with an SLA violation; best fit {dest} keeps "
            f"{_g(free[dest])} vcores free"
        )
        actions.append(
            Action("move", task.id, task.job_id, task.node, dest, None, task.interference, why)
        )
    return Arbitration(tuple(violations), tuple(actions), free)


def _throttle(task: BatchTask, share: float) -> Action:
    verb = "paused" if share == 0 else f"throttled to {_g(share)} of its allocation"
    why = f"on {task.node} with an SLA violation; no node fits {_g(task.vcores)} vcores: {verb}"
    return Action("throttle", task.id, task.job_id, task.node, None, share, task.interference, why)
