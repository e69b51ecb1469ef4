"""Phase-level simulation: PRISM's Algorithm 1 against task-level containers on the same jobs
(seed ``003``, sections 3 to 6; the pure scheduler is ``app.policies.prism.core``).

Each job has map and reduce tasks; a map task runs ``map`` then ``merge``, a reduce task
``shuffle`` then ``reduce``, each phase with its own vcores, memory and duration
(``core.JobProfile``). Two schedulers run the same jobs on the same nodes:

* ``task`` (what YARN does today): a task gets one container sized for its most demanding phase
  and holds it from its first phase's start to its last phase's end. At every event each node
  starts tasks while one fits, the job with the lowest dominant share first (DRF, as the
  CapacityScheduler orders a queue's apps by fairness), maps before reduces.
* ``prism``: at every event each node heartbeats ``core.schedule``: a phase holds only its own
  demand, a task between phases is paused on its node and holds nothing, and the next phase
  starts when Algorithm 1 picks it.

Reduces become launchable when all of their job's maps have finished (no slow-start). Both
schedulers see the same arrivals; events at one instant are handled together. Metrics: each
job's running time (arrival to last task's end), the makespan, and vcore utilization (vcore-
seconds the phases actually used over capacity x makespan; the phases use the same in both
models, so a shorter makespan is a higher utilization, which is how section 6 measures it).

Decisions where the paper is silent: a node heartbeats at every event (arrival or phase end),
so neither scheduler waits for one, and every ``HEARTBEAT_S`` while tasks are paused (their
urgency grows with the wait, eq. 6, so a pick can become worth it with nothing else
happening); the synthetic jobs (``synthetic_jobs``) follow section 3's observation that the
phases of one task differ in demand (map CPU-bound, merge memory-bound, shuffle light on CPU,
reduce in between), with seeded variation, since the public traces carry no phase profiles.

Recorded jobs (``recorded_jobs``): the MapReduce jobs the sidecar's history collector stored
from the JobHistory server, at their real submission times. A map task's phase is its average
map time (the JobHistory server does not split the map-side merge from it, so ``merge`` lasts 0
s); a reduce task's ``shuffle`` is its average shuffle time and its ``reduce`` the average merge
(sort) and reduce times. Each phase holds what its task kind used (``history.task_use``: CPU time
over task time, physical memory per task), the counters not splitting shuffle from reduce; the
task model holds the container YARN really allocated (``PhaseJob.containers``), which is what
PRISM's phase-level allocation competes with.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.domain.history import MAP, REDUCE, MapReduceJob, task_use
from app.policies.prism import core

MODELS = ("task", "prism")
# A NodeManager's heartbeat interval (``yarn.resourcemanager.nodemanagers.heartbeat-interval-ms``
# default 1 s): how often a node with paused tasks asks again.
HEARTBEAT_S = 1.0
_SLACK = 1e-9


@dataclass(frozen=True, slots=True)
class PhaseJob:
    """A job to simulate: arrival, task counts and phase profile."""

    id: str
    arrival_s: float
    maps: int
    reduces: int
    profile: core.JobProfile
    # The task model's map and reduce containers; None: sized for the task's peak phase.
    containers: tuple[core.Demand, core.Demand] | None = None


@dataclass(frozen=True, slots=True)
class PhaseResult:
    """What one model did with the jobs."""

    model: str
    running_s: dict[str, float]
    makespan_s: float
    vcore_utilization: float
    phases_started: int

    @property
    def mean_running_s(self) -> float:
        """Mean job running time."""
        return sum(self.running_s.values()) / len(self.running_s) if self.running_s else 0.0


@dataclass(slots=True)
class _Job:
    spec: PhaseJob
    usage: core.Demand = field(default_factory=core.Demand)
    maps: core.TaskCounts = field(default_factory=core.TaskCounts)
    reduces: core.TaskCounts = field(default_factory=core.TaskCounts)
    maps_done: int = 0
    reduces_done: int = 0
    end_s: float = 0.0
    done: bool = False

    def prism(self) -> core.PrismJob:
        return core.PrismJob(self.spec.id, self.spec.profile, self.usage, self.maps, self.reduces)


@dataclass(slots=True)
class _Node:
    id: str
    capacity: core.Demand
    free: core.Demand
    paused: list[core.PausedTask] = field(default_factory=list)


def _peak(profile: core.JobProfile, task_type: str) -> core.Demand:
    a, b = (profile.map, profile.merge) if task_type == "map" else (profile.shuffle, profile.reduce)
    return core.Demand(max(a.vcores, b.vcores), max(a.memory_mb, b.memory_mb))


def _container(job: PhaseJob, task_type: str) -> core.Demand:
    if job.containers is None:
        return _peak(job.profile, task_type)
    return job.containers[0] if task_type == "map" else job.containers[1]


def _length(profile: core.JobProfile, task_type: str) -> float:
    a, b = (profile.map, profile.merge) if task_type == "map" else (profile.shuffle, profile.reduce)
    return a.duration_s + b.duration_s


def simulate(
    jobs: Sequence[PhaseJob],
    nodes: int,
    node_capacity: core.Demand,
    model: str,
    params: core.PrismParams | None = None,
) -> PhaseResult:
    """Run ``jobs`` on ``nodes`` identical nodes under ``model`` (``task`` or ``prism``)."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}")
    state = {j.id: _Job(j) for j in jobs}
    if len(state) != len(jobs):
        raise ValueError("job ids must be unique")
    run = _Run(state, [_Node(f"n{k}", node_capacity, node_capacity) for k in range(nodes)])
    for j in jobs:
        run.push(j.arrival_s, _ARRIVE, (j.id,))
    while run.events:
        now = run.events[0][0]
        while run.events and run.events[0][0] <= now + _SLACK:
            run.handle(heapq.heappop(run.events))
        if model == "prism":
            run.heartbeat_prism(now, params or core.PrismParams())
        else:
            run.fill_tasks(now)
    stuck = sorted(j.spec.id for j in state.values() if not j.done)
    if stuck:
        raise ValueError(f"jobs never finished (no node fits their tasks?): {', '.join(stuck[:5])}")
    first = min((j.arrival_s for j in jobs), default=0.0)
    makespan = max(0.0, run.end - first)
    capacity = nodes * node_capacity.vcores * makespan
    return PhaseResult(
        model,
        {j.spec.id: j.end_s - j.spec.arrival_s for j in state.values()},
        makespan,
        run.used_vcore_s / capacity if capacity > 0 else 0.0,
        run.started,
    )


# An event's kind, its tie-break after time and insertion order: a phase (or task) ends, a job
# arrives, the nodes heartbeat.
_END, _ARRIVE, _BEAT = 0, 1, 2


@dataclass(slots=True)
class _Run:
    """One simulation's event heap ``(time, seq, kind, payload)`` and what it has counted."""

    state: dict[str, _Job]
    cluster: list[_Node]
    events: list[tuple[float, int, int, tuple[Any, ...]]] = field(default_factory=list)
    seq: int = 0
    used_vcore_s: float = 0.0
    beat_pending: bool = False
    started: int = 0  # phases started
    task_ids: int = 0
    end: float = 0.0  # when the last task ended

    def push(self, at: float, kind: int, payload: tuple[Any, ...]) -> None:
        """Schedule an event; ties in time keep the order they were pushed in."""
        heapq.heappush(self.events, (at, self.seq, kind, payload))
        self.seq += 1

    def handle(self, event: tuple[float, int, int, tuple[Any, ...]]) -> None:
        """Apply one event: a heartbeat's, a job's arrival (its maps, or its reduces when it
        has none, become pending), or a phase's end (its resources freed; a leading phase's
        task pauses on its node for its next phase, a last phase ends its task)."""
        now, _, kind, payload = event
        if kind == _BEAT:
            self.beat_pending = False
            return
        if kind == _ARRIVE:
            job = self.state[payload[0]]
            job.maps = core.TaskCounts(job.spec.maps, 0)
            if job.spec.maps == 0:
                job.reduces = core.TaskCounts(job.spec.reduces, 0)
            return
        node_k, job_id, task_id, phase, demand = payload
        node, job = self.cluster[node_k], self.state[job_id]
        node.free = core.Demand(
            node.free.vcores + demand.vcores, node.free.memory_mb + demand.memory_mb
        )
        job.usage = job.usage.minus(demand)
        if phase in core.NEXT:  # a leading phase ended: the task waits for its next phase
            node.paused.append(core.PausedTask(task_id, job_id, core.NEXT[phase], now))
            return
        _task_done(job, core.TASK_TYPE[phase], now)
        self.end = max(self.end, now)

    def heartbeat_prism(self, now: float, params: core.PrismParams) -> None:
        """Every node's PRISM heartbeat: start the phases it picks (a leading phase starts a new
        task; a paused task resumes), then heartbeat again while tasks are paused."""
        for k, node in enumerate(self.cluster):
            for pick in _heartbeat_prism(node, self.state, now, params):
                c = pick.chosen.candidate
                job = self.state[c.job_id]
                task_id = c.task_id
                if c.leading:
                    task_id = f"t{self.task_ids}"
                    self.task_ids += 1
                    _launch(job, core.TASK_TYPE[c.phase])
                else:
                    node.paused = [t for t in node.paused if t.id != task_id]
                demand = pick.chosen.demand
                node.free = node.free.minus(demand)
                job.usage = job.usage.plus(demand)
                duration = job.spec.profile.phase(c.phase).duration_s
                self.used_vcore_s += demand.vcores * duration
                self.started += 1
                self.push(now + duration, _END, (k, c.job_id, task_id, c.phase, demand))
        if not self.beat_pending and any(node.paused for node in self.cluster):
            # paused tasks gain urgency with time: the nodes heartbeat again
            self.push(now + HEARTBEAT_S, _BEAT, ())
            self.beat_pending = True

    def fill_tasks(self, now: float) -> None:
        """Task-level scheduling: each node starts whole tasks, each on a container of its
        phases' peak, while one fits."""
        for k, node in enumerate(self.cluster):
            while (chosen := _next_task(node, self.state)) is not None:
                job, task_type = chosen
                demand = _container(job.spec, task_type)
                _launch(job, task_type)
                node.free = node.free.minus(demand)
                job.usage = job.usage.plus(demand)
                prof = job.spec.profile
                a, b = (prof.map, prof.merge) if task_type == "map" else (prof.shuffle, prof.reduce)
                self.used_vcore_s += a.vcores * a.duration_s + b.vcores * b.duration_s
                self.started += 2
                # the whole task as its second phase: it ends the task when it ends
                last = "merge" if task_type == "map" else "reduce"
                length = _length(prof, task_type)
                self.push(now + length, _END, (k, job.spec.id, "", last, demand))


def _launch(job: _Job, task_type: str) -> None:
    counts = job.maps if task_type == "map" else job.reduces
    moved = core.TaskCounts(counts.pending - 1, counts.running + 1)
    if task_type == "map":
        job.maps = moved
    else:
        job.reduces = moved


def _task_done(job: _Job, task_type: str, now: float) -> None:
    if task_type == "map":
        job.maps = core.TaskCounts(job.maps.pending, job.maps.running - 1)
        job.maps_done += 1
        if job.maps_done == job.spec.maps:
            job.reduces = core.TaskCounts(job.spec.reduces, 0)
            if job.spec.reduces == 0:
                job.end_s, job.done = now, True
    else:
        job.reduces = core.TaskCounts(job.reduces.pending, job.reduces.running - 1)
        job.reduces_done += 1
        if job.reduces_done == job.spec.reduces:
            job.end_s, job.done = now, True


def _heartbeat_prism(
    node: _Node, state: dict[str, _Job], now: float, params: core.PrismParams
) -> tuple[core.Pick, ...]:
    active = [j.prism() for j in state.values() if j.spec.arrival_s <= now + _SLACK and not j.done]
    if not active:
        return ()
    view = core.NodeView(node.id, node.capacity, node.free)
    return core.schedule(view, active, list(node.paused), now, params).picks


def _next_task(node: _Node, state: dict[str, _Job]) -> tuple[_Job, str] | None:
    best: tuple[float, str, _Job, str] | None = None
    for job in state.values():
        for task_type in ("map", "reduce"):
            counts = job.maps if task_type == "map" else job.reduces
            if not counts.pending or not _peak(job.spec.profile, task_type).fits_in(node.free):
                continue
            share = core.job_share(job.usage, node.capacity)
            key = (share, job.spec.id, job, task_type)
            if best is None or key[:2] < best[:2]:
                best = key
            break  # maps before reduces within a job
    return None if best is None else (best[2], best[3])


def synthetic_jobs(count: int, seed: int, *, mean_gap_s: float = 20.0) -> list[PhaseJob]:
    """Seeded jobs with phase profiles of differing demand (module docstring)."""
    rnd = random.Random(seed)
    out: list[PhaseJob] = []
    t = 0.0
    for k in range(count):
        t += rnd.expovariate(1 / mean_gap_s)
        scale = rnd.uniform(0.5, 2.0)
        profile = core.JobProfile(
            map=core.PhaseProfile(rnd.choice((1.0, 2.0)), 1024, 30 * scale),
            merge=core.PhaseProfile(0.5, rnd.choice((1536.0, 2048.0)), 8 * scale),
            shuffle=core.PhaseProfile(0.5, 1024, 15 * scale),
            reduce=core.PhaseProfile(rnd.choice((1.0, 2.0)), 2048, 20 * scale),
        )
        maps = rnd.choice((4, 8, 16, 32))
        out.append(PhaseJob(f"j{k:04d}", round(t, 3), maps, max(1, maps // 4), profile))
    return out


def recorded_jobs(jobs: Sequence[MapReduceJob]) -> list[PhaseJob]:
    """The stored MapReduce jobs as phase jobs, oldest first (module docstring); jobs without a
    submission time or a completed task are left out."""
    usable = [
        j for j in jobs if j.submit_ms is not None and j.maps_completed + j.reduces_completed > 0
    ]
    usable.sort(key=lambda j: (j.submit_ms or 0, j.job_id))
    first = min((j.submit_ms or 0 for j in usable), default=0)
    out: list[PhaseJob] = []
    for j in usable:
        m, r = task_use(j, MAP), task_use(j, REDUCE)
        map_phase = core.PhaseProfile(m.vcores, m.memory_mb, j.avg_map_ms / 1000)
        reduce_use = (r.vcores, r.memory_mb)
        profile = core.JobProfile(
            map=map_phase,
            merge=core.PhaseProfile(m.vcores, m.memory_mb, 0.0),
            shuffle=core.PhaseProfile(*reduce_use, j.avg_shuffle_ms / 1000),
            reduce=core.PhaseProfile(*reduce_use, (j.avg_merge_ms + j.avg_reduce_ms) / 1000),
        )
        containers = (
            core.Demand(m.container_vcores, m.container_mb),
            core.Demand(r.container_vcores, r.container_mb),
        )
        out.append(
            PhaseJob(
                j.job_id,
                ((j.submit_ms or 0) - first) / 1000,
                j.maps_completed,
                j.reduces_completed,
                profile,
                containers,
            )
        )
    return out


def check_fits(jobs: Sequence[PhaseJob], node: core.Demand) -> None:
    """``ValueError`` naming the first job whose container does not fit on one node."""
    for j in jobs:
        for task_type in ("map", "reduce"):
            c = _container(j, task_type)
            if c.vcores > node.vcores + _SLACK or c.memory_mb > node.memory_mb + _SLACK:
                raise ValueError(
                    f"job {j.id}: its {task_type} container ({c.vcores:g} vcores, "
                    f"{c.memory_mb:g} MB) does not fit a node ({node.vcores:g} vcores, "
                    f"{node.memory_mb:g} MB)"
                )
