"""PRISM: phase-level resource-aware task scheduling (seed 003, Zhang et al.,
sections 3, 4 and 5).

A map task runs the phases ``map`` then ``merge``; a reduce task ``shuffle`` then ``reduce``
(section 2.2; the short ``sort`` is folded into ``shuffle``, as in Fig. 2(c)-(d)). Each phase has
its own demand (vcores, memory) and duration (section 3), so between phases a task may be *paused*
until its next phase fits (section 4). ``schedule`` is Algorithm 1: on a node heartbeat, score
every candidate phase with ``U = U_fairness + alpha * U_perf`` (eq. 1) and start the best one,
repeatedly, while something fits with positive utility.

- ``U_fairness`` (eqs. 2, 3): the fall in unfairness ``max_{j,j'} |s_j - s_j'|`` over all jobs in
  the system when the phase's demand is added to its job's usage.
- ``U_perf`` (eq. 4): for a leading phase (``map``, ``shuffle``: a new task) the parallelism gain
  ``N_rem / max(N_cur, eps) - N_rem / (N_cur + 1)`` (eq. 5); for a subsequent phase (``merge``,
  ``reduce`` of a paused task) the urgency ``p(T_wait) = a * T_wait^2`` (eq. 6).

Decisions where the paper is ambiguous or silent:

* Eq. 3 writes ``min_r c_jr / C_r`` but names DRF, whose share is the *dominant* (largest) one;
  ``share = "dominant"`` (default) follows DRF, ``share = "min"`` the formula as printed. ``C_r``
  is "the capacity of resource r on a single machine": the node's capacity. ``c_jr`` is the job's
  usage across the cluster, as reported.
* Eq. 6 prints ``p(T) = a * p(T)^2``; the text ("a quadratic function", a = 0.1) means
  ``a * T^2``. ``T_wait = now - paused_since``.
* ``N_remaining`` counts the job's tasks of the type not yet completed (pending + running);
  ``N_current`` the running ones (paused tasks included: they hold their place in the job). The
  paper gives no value for ``eps``; 0.1 (below 1, so the first task of a type gains
  ``9 * N_rem``). ``alpha`` defaults to 1 (no value in the paper).
* A paused task holds no resources: its next phase needs its own demand (section 4: "may not be
  scheduled immediately if the machine does not have sufficient resources to run the subsequent
  phase").
* Candidates (Algorithm 1 lines 6-17): the next phase of every task paused on this node, and for
  the ``top_k`` jobs with the lowest fairness share (the "highest deficit"; ties by job id) that
  still have pending tasks, the leading phase of one new map task and one new reduce task
  (``pending`` counts only tasks launchable now, i.e. reduces past slow-start). Locality ordering
  is not modelled: the sidecar does not see HDFS block placement.
* The loop ends when no candidate both fits the node's free resources and has ``U > 0`` (the
  text: "no suitable phase to be scheduled"); candidates are rebuilt after every pick, so a job
  can start several tasks on one heartbeat. Ties in ``U`` go to the smaller job id, then phase
  order (map, merge, shuffle, reduce), then task id.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.policies.base import ParamSpec, PolicyError, PolicySpec
from app.policies.base import finite_number as _number

PHASES: tuple[str, ...] = ("map", "merge", "shuffle", "reduce")
LEADING: Mapping[str, str] = {"map": "map", "reduce": "shuffle"}  # task type -> first phase
NEXT: Mapping[str, str] = {"map": "merge", "shuffle": "reduce"}  # phase -> subsequent phase
TASK_TYPE: Mapping[str, str] = {
    "map": "map",
    "merge": "map",
    "shuffle": "reduce",
    "reduce": "reduce",
}
SHARES: tuple[str, str] = ("dominant", "min")
_SLACK = 1e-9  # float slack when comparing resource sums

# ---------------------------------------------------------------- parameters

_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec("alpha", float, 1.0, "weight of U_perf against U_fairness (eq. 1)", minimum=0.0),
    ParamSpec(
        "epsilon",
        float,
        0.1,
        "eps of eq. 5: N_current floor for a type with no running task",
        minimum=0.0,
        maximum=1.0,
        exclusive_minimum=True,
        exclusive_maximum=True,
    ),
    ParamSpec(
        "urgency_a",
        float,
        0.1,
        "a of the urgency p(T_wait) = a * T_wait^2 (eq. 6)",
        minimum=0.0,
        exclusive_minimum=True,
    ),
    ParamSpec("top_k", int, 20, "jobs with the highest deficit offering new tasks", minimum=1),
    ParamSpec("share", str, "dominant", "job share in eq. 3: DRF dominant or min", choices=SHARES),
)

REGISTRY: tuple[PolicySpec, ...] = (
    PolicySpec(
        name="prism",
        kind="task",
        summary="PRISM: phase-level scheduling; start the map/merge/shuffle/reduce phase with the "
        "highest fairness + performance utility while it fits the node.",
        paper="seed 003 (Zhang et al., PRISM), sections 3 to 5 (eqs. 1 to 6, Algorithm 1)",
        params=_PARAMS,
    ),
)


@dataclass(frozen=True, slots=True)
class PrismParams:
    """Validated parameters; build from a plain mapping with ``make_params``."""

    alpha: float = 1.0
    epsilon: float = 0.1
    urgency_a: float = 0.1
    top_k: int = 20
    share: str = "dominant"

    def __post_init__(self) -> None:
        for spec in _PARAMS:
            spec.validate(getattr(self, spec.name))


def make_params(values: Mapping[str, Any] | None = None) -> PrismParams:
    """Registry defaults overlaid with ``values``; errors name the parameter."""
    return PrismParams(**REGISTRY[0].validate(values or {}))


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PolicyError(where, f"must be a whole number >= 0, got {value!r}")
    return value


# ---------------------------------------------------------------- profiles and state


@dataclass(frozen=True, slots=True)
class Demand:
    """An amount of the two resources YARN schedules (vcores may be fractional in a profile)."""

    vcores: float = 0.0
    memory_mb: float = 0.0

    def __post_init__(self) -> None:
        _number(self.vcores, "vcores")
        _number(self.memory_mb, "memory_mb")

    def plus(self, other: Demand) -> Demand:
        """Elementwise sum."""
        return Demand(self.vcores + other.vcores, self.memory_mb + other.memory_mb)

    def minus(self, other: Demand) -> Demand:
        """Elementwise difference, clamped at 0 (float dust below the fit slack)."""
        return Demand(
            max(0.0, self.vcores - other.vcores), max(0.0, self.memory_mb - other.memory_mb)
        )

    def fits_in(self, free: Demand) -> bool:
        """Both resources within ``free``."""
        return self.vcores <= free.vcores + _SLACK and self.memory_mb <= free.memory_mb + _SLACK

    def to_dict(self) -> dict[str, float]:
        """JSON form."""
        return {"vcores": float(self.vcores), "memory_mb": float(self.memory_mb)}


@dataclass(frozen=True, slots=True)
class PhaseProfile:
    """What one phase of one task needs while it runs, and for how long (section 3)."""

    vcores: float
    memory_mb: float
    duration_s: float = 0.0

    def __post_init__(self) -> None:
        _number(self.vcores, "vcores")
        _number(self.memory_mb, "memory_mb")
        _number(self.duration_s, "duration_s")

    @property
    def demand(self) -> Demand:
        """The resources the phase holds."""
        return Demand(self.vcores, self.memory_mb)


@dataclass(frozen=True, slots=True)
class JobProfile:
    """Phase-level profile of a job's map and reduce tasks."""

    map: PhaseProfile
    merge: PhaseProfile
    shuffle: PhaseProfile
    reduce: PhaseProfile

    @classmethod
    def task_level(cls, map_task: PhaseProfile, reduce_task: PhaseProfile) -> JobProfile:
        """Section 4's fallback for an unprofiled job: every phase asks for its task's container."""
        return cls(map_task, map_task, reduce_task, reduce_task)

    def phase(self, name: str) -> PhaseProfile:
        """The profile of phase ``name`` (one of ``PHASES``)."""
        if name not in PHASES:
            raise PolicyError("phase", f"must be one of {', '.join(PHASES)}, got {name!r}")
        profile: PhaseProfile = getattr(self, name)
        return profile


@dataclass(frozen=True, slots=True)
class TaskCounts:
    """Tasks of one type: launchable now (``pending``) and launched, not finished (``running``)."""

    pending: int = 0
    running: int = 0

    def __post_init__(self) -> None:
        _count(self.pending, "pending")
        _count(self.running, "running")

    @property
    def remaining(self) -> int:
        """``N_remaining``: not yet completed."""
        return self.pending + self.running


@dataclass(frozen=True, slots=True)
class PrismJob:
    """A running job: profile, cluster-wide usage and task counts per type."""

    id: str
    profile: JobProfile
    usage: Demand = Demand()
    maps: TaskCounts = TaskCounts()
    reduces: TaskCounts = TaskCounts()

    def counts(self, task_type: str) -> TaskCounts:
        """The counts of ``map`` or ``reduce`` tasks."""
        return self.maps if task_type == "map" else self.reduces


@dataclass(frozen=True, slots=True)
class PausedTask:
    """A task on this node that finished a phase and waits to start ``next_phase``."""

    id: str
    job_id: str
    next_phase: str
    paused_since_s: float

    def __post_init__(self) -> None:
        if self.next_phase not in NEXT.values():
            raise PolicyError(
                "next_phase", f"must be a subsequent phase (merge, reduce), got {self.next_phase!r}"
            )
        if not math.isfinite(self.paused_since_s):
            raise PolicyError("paused_since_s", "must be finite")


@dataclass(frozen=True, slots=True)
class NodeView:
    """The heartbeating node: its capacity (``C_r`` of eq. 3) and free resources."""

    id: str
    capacity: Demand
    free: Demand

    def __post_init__(self) -> None:
        if self.capacity.vcores <= 0 or self.capacity.memory_mb <= 0:
            raise PolicyError("node.capacity", "vcores and memory_mb must be > 0")
        if not self.free.fits_in(self.capacity):
            raise PolicyError("node.free", "must not exceed the node's capacity")


# ---------------------------------------------------------------- utility (eqs. 1 to 6)


def job_share(usage: Demand, capacity: Demand, share: str = "dominant") -> float:
    """A job's share of ``C_r`` per eq. 3: the dominant (DRF) or the smallest resource share."""
    ratios = (usage.vcores / capacity.vcores, usage.memory_mb / capacity.memory_mb)
    return max(ratios) if share == "dominant" else min(ratios)


def unfairness(shares: Iterable[float]) -> float:
    """Eq. 3: ``max_{j,j'} |s_j - s_j'|``, the spread of the shares (0 for fewer than 2 jobs)."""
    values = list(shares)
    return max(values) - min(values) if len(values) > 1 else 0.0


def fairness_utility(
    usages: Mapping[str, Demand], job_id: str, demand: Demand, capacity: Demand, share: str
) -> float:
    """Eq. 2: unfairness before minus unfairness after adding ``demand`` to ``job_id``."""
    before = {j: job_share(u, capacity, share) for j, u in usages.items()}
    after = dict(before)
    after[job_id] = job_share(usages[job_id].plus(demand), capacity, share)
    return unfairness(before.values()) - unfairness(after.values())


def leading_phase_utility(n_remaining: int, n_current: int, epsilon: float) -> float:
    """Eq. 5: the parallelism gain of running ``n_current + 1`` tasks of the type."""
    return n_remaining / max(n_current, epsilon) - n_remaining / (n_current + 1)


def urgency(t_wait_s: float, a: float) -> float:
    """Eq. 6 with the paper's quadratic ``p``: ``a * T_wait^2``."""
    return a * t_wait_s * t_wait_s


@dataclass(frozen=True, slots=True)
class Candidate:
    """A phase that could start on the node: a new task's leading phase or a paused task's next."""

    job_id: str
    phase: str
    task_id: str | None  # None: a new task
    t_wait_s: float = 0.0

    @property
    def leading(self) -> bool:
        """A leading phase starts a new task."""
        return self.task_id is None

    def order(self) -> tuple[str, int, str]:
        """Tie-break key: job id, phase order, task id (new tasks first)."""
        return (self.job_id, PHASES.index(self.phase), self.task_id or "")


@dataclass(frozen=True, slots=True)
class Scored:
    """A candidate with its eq. 1 utility, its parts and whether it fits the free resources."""

    candidate: Candidate
    demand: Demand
    fits: bool
    fairness: float
    perf: float
    utility: float

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        c = self.candidate
        return {
            "job": c.job_id,
            "task": c.task_id,
            "phase": c.phase,
            "leading": c.leading,
            "t_wait_s": float(c.t_wait_s),
            **self.demand.to_dict(),
            "fits": self.fits,
            "fairness": self.fairness,
            "perf": self.perf,
            "utility": self.utility,
        }


def score(
    candidate: Candidate,
    jobs: Mapping[str, PrismJob],
    node: NodeView,
    params: PrismParams,
) -> Scored:
    """Eq. 1 for one candidate: ``U_fairness + alpha * U_perf`` (eqs. 2 to 6)."""
    job = jobs[candidate.job_id]
    demand = job.profile.phase(candidate.phase).demand
    usages = {j: s.usage for j, s in jobs.items()}
    fair = fairness_utility(usages, job.id, demand, node.capacity, params.share)
    if candidate.leading:
        counts = job.counts(TASK_TYPE[candidate.phase])
        perf = leading_phase_utility(counts.remaining, counts.running, params.epsilon)
    else:
        perf = urgency(candidate.t_wait_s, params.urgency_a)
    utility = fair + params.alpha * perf
    return Scored(candidate, demand, demand.fits_in(node.free), fair, perf, utility)


# ---------------------------------------------------------------- Algorithm 1


@dataclass(frozen=True, slots=True)
class Pick:
    """One phase started by Algorithm 1, with the candidates it beat."""

    step: int
    chosen: Scored
    duration_s: float
    free_after: Demand
    considered: tuple[Scored, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "step": self.step,
            **self.chosen.to_dict(),
            "duration_s": float(self.duration_s),
            "free_after": self.free_after.to_dict(),
            "considered": [s.to_dict() for s in self.considered],
        }


@dataclass(frozen=True, slots=True)
class Schedule:
    """Algorithm 1's ``PhaseSelected`` in pick order, what is left free, and why it stopped."""

    node_id: str
    picks: tuple[Pick, ...]
    free_after: Demand
    stop_reason: str
    last_considered: tuple[Scored, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "node": self.node_id,
            "picks": [p.to_dict() for p in self.picks],
            "free_after": self.free_after.to_dict(),
            "stop_reason": self.stop_reason,
            "last_considered": [s.to_dict() for s in self.last_considered],
        }


def _check_inputs(jobs: Sequence[PrismJob], paused: Sequence[PausedTask], now_s: float) -> None:
    if not math.isfinite(now_s):
        raise PolicyError("now_s", "must be finite")
    ids: set[str] = set()
    for k, job in enumerate(jobs):
        if job.id in ids:
            raise PolicyError(f"jobs[{k}].id", f"job {job.id!r} appears twice")
        ids.add(job.id)
    tasks: set[str] = set()
    for k, task in enumerate(paused):
        if task.job_id not in ids:
            raise PolicyError(f"paused[{k}].job_id", f"unknown job {task.job_id!r}")
        if task.id in tasks:
            raise PolicyError(f"paused[{k}].id", f"task {task.id!r} appears twice")
        tasks.add(task.id)
        if task.paused_since_s > now_s:
            raise PolicyError(f"paused[{k}].paused_since_s", f"is after now_s ({now_s:g})")


def candidates(
    jobs: Mapping[str, PrismJob],
    paused: Iterable[PausedTask],
    node: NodeView,
    now_s: float,
    params: PrismParams,
) -> list[Candidate]:
    """Algorithm 1 lines 6-17: paused tasks' next phases, new tasks of the top-k deficit jobs."""
    out = [Candidate(t.job_id, t.next_phase, t.id, now_s - t.paused_since_s) for t in paused]
    with_work = [j for j in jobs.values() if j.maps.pending or j.reduces.pending]
    ranked = sorted(
        with_work, key=lambda j: (job_share(j.usage, node.capacity, params.share), j.id)
    )
    for job in ranked[: params.top_k]:
        for task_type in ("map", "reduce"):
            if job.counts(task_type).pending:
                out.append(Candidate(job.id, LEADING[task_type], None))
    return out


def _start(jobs: Mapping[str, PrismJob], chosen: Scored) -> dict[str, PrismJob]:
    """Job state after the chosen phase starts: usage grows; a new task leaves pending."""
    c = chosen.candidate
    job = jobs[c.job_id]
    job = replace(job, usage=job.usage.plus(chosen.demand))
    if c.leading:
        task_type = TASK_TYPE[c.phase]
        counts = job.counts(task_type)
        moved = TaskCounts(counts.pending - 1, counts.running + 1)
        job = replace(job, maps=moved) if task_type == "map" else replace(job, reduces=moved)
    return {**jobs, c.job_id: job}


def _stop_reason(scored: Sequence[Scored]) -> str:
    if not scored:
        return "no candidate phase: no paused task on the node and no pending task"
    if not any(s.fits for s in scored):
        return "no candidate phase fits the free resources"
    return "no fitting candidate phase has a positive utility"


def schedule(
    node: NodeView,
    jobs: Sequence[PrismJob],
    paused: Sequence[PausedTask],
    now_s: float,
    params: PrismParams | None = None,
) -> Schedule:
    """Algorithm 1 on one heartbeat of ``node``: start the highest-utility phase while one fits
    with ``U > 0``; returns the picks in order with their utilities."""
    p = params or PrismParams()
    _check_inputs(jobs, paused, now_s)
    state = {j.id: j for j in jobs}
    waiting = list(paused)
    picks: list[Pick] = []
    while True:
        scored = [score(c, state, node, p) for c in candidates(state, waiting, node, now_s, p)]
        eligible = [s for s in scored if s.fits and s.utility > 0]
        if not eligible:
            return Schedule(node.id, tuple(picks), node.free, _stop_reason(scored), tuple(scored))
        best = min(eligible, key=lambda s: (-s.utility, s.candidate.order()))
        node = replace(node, free=node.free.minus(best.demand))
        state = _start(state, best)
        waiting = [t for t in waiting if t.id != best.candidate.task_id]
        profile = state[best.candidate.job_id].profile.phase(best.candidate.phase)
        picks.append(Pick(len(picks) + 1, best, profile.duration_s, node.free, tuple(scored)))
