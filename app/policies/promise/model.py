"""Promise's planner, its inputs and outputs: waiting and running jobs, its parameters, the
decisions a round returns with their ETAs (``core.admit``), and the round itself as it decides
(``Round``). Pure.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from app.policies.base import decision_dict
from app.policies.promise.estimator import Estimate, Estimator
from app.policies.promise.grants import waves
from app.policies.promise.loss import Load
from app.policies.promise.signature import Keys


@dataclass(frozen=True, slots=True)
class WaitingJob:
    """A job waiting for admission."""

    id: str
    tasks: int
    deadline_s: float
    submitted_s: float
    keys: Keys
    # This round is its first (the live sidecar's submission round, a moment after its
    # submission); the simulator's first round is at its submission itself.
    first_round: bool = False
    # Its first wave is timed, so a miss ends at that wave's verdict (``risk._miss_waste``): every
    # simulated job; live, a run that says each task has a container of its own (MapReduce).
    # Otherwise (Spark, the ``sleep`` template) only its deadline shows a miss.
    timed: bool = True

    @property
    def deadline_at(self) -> float:
        """Absolute deadline."""
        return self.submitted_s + self.deadline_s

    def at_first_round(self, now_s: float) -> bool:
        """Whether a round at ``now_s`` is its first: flagged so (live), or at its submission
        itself (the simulator)."""
        return self.first_round or now_s <= self.submitted_s


@dataclass(frozen=True, slots=True)
class RunningJob:
    """An admitted job on a fixed grant since ``started_s``."""

    id: str
    tasks: int
    deadline_s: float
    submitted_s: float
    started_s: float
    cpus: int
    keys: Keys
    # What its tasks showed so far: how long its first wave's tasks have run without ending, or
    # took once they ended, a lower bound of a task's duration; 0: not observed (``core.admit``,
    # "first wave").
    task_floor_s: float = 0.0
    # When its progress says it ends: the share of its work still to do at the rate its progress
    # has been rising (``progress_end``); 0: not seen yet (``PromiseParams.progress_s``).
    progress_end_s: float = 0.0

    @property
    def deadline_at(self) -> float:
        """Absolute deadline."""
        return self.submitted_s + self.deadline_s


def progress_end(p0: float, t0: float, p1: float, t1: float) -> float:
    """When a run whose progress (0 to 1) read ``p0`` at ``t0`` and ``p1`` at ``t1`` ends if it
    keeps rising at that rate; 0 when it did not rise (no rate to project from). Two readings,
    not one since the start: progress jumps at set-up (MapReduce counts its job set-up in it)
    and stays at 0 while the ApplicationMaster starts, either of which skews a rate from 0."""
    if t1 <= t0 or p1 <= p0:
        return 0.0
    return t1 + max(0.0, 1.0 - p1) * (t1 - t0) / (p1 - p0)


@dataclass(frozen=True, slots=True)
class PromiseParams:
    """Validated parameters (``core.make_params``)."""

    am_containers: int = 0
    learn_cpus: int = 1
    crowd_out: bool = True
    waste_price: float = 1.0
    # How a job's work spreads over its grant: in waves of whole tasks (YARN's containers, the
    # default), or divided evenly over any grant up to its task count (the simulator's fluid
    # model, where the thesis' perfect parallelism runs a job on ``g`` vcores in ``work / g``).
    # The simulator sets it from its cluster model; planning in waves on a cluster that does
    # not run in them asks for grants it does not need.
    divisible: bool = False
    # How long after its start a run's progress shows when it will end (the rate between two of
    # the sidecar's readings, one per admission tick); a timed job's miss wastes its grant for no
    # longer (``risk``). 0: its progress is not read.
    progress_s: float = 0.0


class Decision(NamedTuple):
    """One decision with its ETA (absolute seconds, the caller's clock)."""

    action: str  # admit | queue | drop | kill | keep
    job_id: str
    cpus: int
    reason: str
    start_s: float | None = None
    finish_s: float | None = None  # bound: finishes by then if the estimate holds
    finish_point_s: float | None = None  # central value of the finish
    earliest_finish_s: float | None = None  # for a drop: the best it could have had
    waits_for: str | None = None
    work_bound: float | None = None
    source: str | None = None
    latest_start_s: float | None = None  # for a queued job: dropped if not started by then
    # for a job held back for the arrivals it would crowd out: how many (``loss.crowded_out``)
    crowd_out: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (audit and ETA)."""
        return decision_dict(self)


def when(t: float, now_s: float) -> str:
    """A time in a decision's reason, relative to the round (absolute times are epoch seconds
    live, which ``:g`` renders as 1.79564e+09; the ETA fields keep the absolute values)."""
    d = t - now_s
    return f"now+{d:.1f}s" if d >= 0 else f"now-{-d:.1f}s"


def queue_decision(j: WaitingJob, est: Estimate, lst: float, waits_for: str) -> Decision:
    """``j`` queued, waiting for ``waits_for``, dropped if not started by ``lst``."""
    return Decision(
        "queue",
        j.id,
        0,
        f"waits for {waits_for}",
        waits_for=waits_for,
        work_bound=est.upper,
        source=est.source,
        latest_start_s=lst,
    )


def unpromised(
    j: WaitingJob, est: Estimate, g: int, now_s: float, finish: float, reason: str
) -> Decision:
    """An admission that promises nothing (a try or an exploration): its ETA is the central
    estimate, and its bound is only reported."""
    return Decision(
        "admit",
        j.id,
        g,
        reason,
        start_s=now_s,
        finish_s=finish,
        finish_point_s=finish,
        work_bound=est.upper,
        source=est.source,
    )


def release(
    j: WaitingJob, est: Estimate, g: int, now_s: float, am: int, div: bool, central: bool = False
) -> tuple[float, int]:
    """``(bounded end, vcores)`` of ``j`` promised ``g`` vcores now (``central``: its central
    end): its entry in a round's release timeline, built one way wherever it is added or taken
    out."""
    work = est.point if central else est.upper
    return (now_s + est.overhead_s + waves(j.tasks, g, div) * (work / j.tasks), g + am)


@dataclass(slots=True)
class Round:
    """One admission round: its inputs, and the decisions and release timelines it builds as it
    decides (``core.admit``)."""

    now_s: float
    capacity: int
    estimator: Estimator
    params: PromiseParams
    # the recent arrivals, what a hold is priced against (None: no rate, or the rule is off)
    load: Load | None
    # mean work of an arriving job: the unit a try's possible waste is priced in (``start_tries``)
    mean_work: float | None
    out: list[Decision] = field(default_factory=list)  # kills, keeps, drops, then admissions
    queued: list[Decision] = field(default_factory=list)
    # (bounded end, vcores) of every running job, then also of each one admitted or tried this
    # round, in time order once the running jobs are in: what promises and ETAs plan on
    held: list[tuple[float, int]] = field(default_factory=list)
    # the same at their central ends, when each is as likely to have ended as not (a running
    # job already past its central end: at its bounded end): what the arrivals a hold crowds
    # out can expect to find (an expectation, as the hold is), and what decides whether
    # waiting for a promise is a bet worth making ("Tries")
    expected: list[tuple[float, int]] = field(default_factory=list)

    @property
    def am(self) -> int:
        """Containers booked per job for its ApplicationMaster."""
        return self.params.am_containers

    @property
    def div(self) -> bool:
        """Whether work divides over any grant (``PromiseParams.divisible``)."""
        return self.params.divisible

    def estimate(self, keys: Keys, tasks: int, deadline_s: float) -> Estimate:
        """A job's work estimate at its full parallelism on this cluster."""
        return self.estimator.estimate(keys, tasks, deadline_s, min(tasks, self.capacity))

    def triable(self, tasks: int) -> bool:
        """Whether a job may be tried at all: any, once a try's waste can be priced; without an
        arrival rate only one that runs whole on ``learn_cpus`` vcores (``start_tries``)."""
        return self.mean_work is not None or tasks <= self.params.learn_cpus

    @property
    def price(self) -> float:
        """What a miss's waste is priced at (``PromiseParams.waste_price``)."""
        return self.params.waste_price

    def hold(self, j: WaitingJob, est: Estimate, g: int) -> float:
        """Book ``g`` vcores for ``j`` from now in both timelines; returns its central end."""
        bisect.insort(self.held, release(j, est, g, self.now_s, self.am, self.div))
        central = release(j, est, g, self.now_s, self.am, self.div, True)
        bisect.insort(self.expected, central)
        return central[0]
