"""Promise: deadline admission that plans with per-signature work bounds (the "Promise" policy).

It keeps the sidecar's promise, "a deadline job runs only if it can finish in time", where the
thesis' allocators (seed 004: PYTHIA chapter 4, Justice and the Oracle chapter 5) lose deadlines
or waste work on real traces:

* Work comes from ``estimator.Estimator``: an upper bound (a quantile of the job's signature
  history) instead of one global fraction.
* Grants respect waves: ``n`` tasks on ``g`` containers take ``ceil(n / g)`` task durations
  (``waves``), so a grant is always the smallest ``g`` with a given wave count (``aligned``);
  the Oracle's grants that do not divide the task count lose a whole partial wave.
* Divisible work (``PromiseParams.divisible``, the simulator's fluid model, which runs a grant
  of ``g`` vcores at ``work / g`` with no waves): ``n`` tasks take ``n / g`` task durations, so
  feasibility, latest starts, ETAs and first-wave verdicts follow the work as that cluster runs
  it, and a job is not refused for a wave it would never run. Whole waves were also a margin (a
  grant of them usually finishes early, absorbing a bound a little low), so the grant is still
  the one whole waves need whenever that fits; otherwise the exact grant, whose only margin is
  the bound's quantile, is promised only when a miss is worth risking, priced as a try is
  (``_exact_worth``), with the chance the bound holds from how many runs it was taken from
  (``bound_chance``: a 0.95 quantile of 3 runs is their largest, which a fourth exceeds one
  time in four); else the job waits. Exact grants everywhere
  wasted more than 0.02 in 21 of the 168 selection cells instead of 6 (``docs/evaluation.md``,
  "Planning divisible work in the fluid model").
* Order and feasibility over the whole waiting set: every waiting job is checked every round;
  jobs are offered capacity least laxity first (earliest latest start; ties: smallest work
  bound), so a job with slack does not take capacity a tighter job needs now and waits for the
  next round instead, and a job's offer is the smallest wave-aligned grant that meets its
  deadline from now, not a fraction inflated for queueing time. (Smallest work first, the rule
  before, let a burst's loose jobs take the cluster ahead of tight jobs that arrived with them:
  on the real mini cluster it met 8 of 12 deadlines where least laxity met 9, and on the
  simulated grid of ``docs/evaluation.md`` the two orders differ in few cells, by at most 0.023.)
  The first job that does not fit gets an expected start at the earliest time the running jobs'
  bounded ends free enough for it (its ETA). Two alternatives were measured on seeded synthetic
  workloads (``app/sim/trace.synthetic`` seeds 1 and 2, not the evaluation traces) and met fewer
  deadlines, so neither is used: an EASY-backfilling reservation for that first job (Lifka 1995),
  which holds capacity for one large job that many small ones could have used, and topping up
  every grant with all idle capacity, which finishes admitted jobs early but leaves no room for
  the next arrivals, whose deadlines start at their own submission ("Top-ups" below is the
  priced version).
* Arrivals it would crowd out (``LoadMeter``, ``_crowded_out``): SDR counts jobs, and a long job on
  most of the cluster can cost dozens of later short ones. A job waits while the arrivals it is
  expected to push out number one or more. The recent arrivals (their rate over the time the meter
  has watched, and each one's need and central work, ``Sizes``) are taken as a multi-rate loss
  system: each arrival needs its vcores at once and holds them for its run, and is lost when they
  are not free. Its occupancy has a product form (Kaufman 1981; Roberts 1981), so what a hold costs
  is how much more often arrivals are blocked on the vcores left beside it; none counts as better
  off for it (in a loss system small arrivals find more room where large ones no longer fit, but in
  the cluster the large ones wait or come back). Those vcores grow as running jobs end: what is free
  now plus what each running or just admitted job releases at its central end, the hold and the
  arrivals being expectations too (at the bounded ends the ETAs plan on, every running job of a
  pooled bound held its vcores to its deadline, and on the held-out slice after 6,000 jobs the goal
  held in 106 cells instead of 109); a running job already past its central end, no longer as likely
  to have ended as not, releases them at its bounded end (counted as ending at once, a few such jobs
  left a hold's arrivals vcores the cluster did not have). The running jobs are the arrivals that
  came before the round, so only those since occupy the loss system: ``t`` seconds in, one that runs
  ``d`` seconds is there for ``min(d, t)`` of them (``_occupancy``, read once per doubling band of
  ``t``). Read as the steady system from the round, the arrivals were counted twice, as running jobs
  and as the arrivals that replace them. Only arrivals with less central work than the held job are
  counted, and only they occupy: a larger arrival is no better use of the vcores (SDR counts jobs),
  and one like the held job meets the same test when it comes. An arrival that can wait until the
  hold ends is not lost: the share of recent arrivals whose slack (how long each could wait and
  still finish on its full parallelism) is shorter than that wait is what counts. Counting arrivals
  as a fluid against their mean demand erred both ways (``docs/evaluation.md``, "The crowd-out
  estimate, hold by hold"): it counted nothing lost once the spare covered the mean, though arrivals
  with no slack block each other at random; and it counted arrivals like the held job, which the
  same rule then held back in turn. On the evaluation's grid the loss system met the goal in 107 of
  112 cells instead of 103 ("Crowd-out as a loss system").
* Top-ups (``_top_up``): a job's work does not depend on its grant, so vcores left over after
  every promise and try may go to this round's promised jobs where their history has runs
  longer than the bound (a quantile) and a larger grant would fit them: a grant is worth its
  chance of meeting the deadline less the arrivals it crowds out. A bound from fewer runs than
  its quantile needs (19 at 0.95) is the largest of them: no run of its history lies above it,
  though a new one does one time in ``n + 1`` (no less often than ``1 - q``), and by
  how much none says. Such a job takes all it can use of what is left where that turns away no
  more arrivals, of any size, than its grant does: a wider grant finishes every run sooner.
  None while a waiting job expects the free vcores (its ETA counts on them), and none without an
  arrival rate.
* Honest early answers: a job whose bound cannot finish by its deadline even with the whole
  cluster from now on is dropped at once with that earliest finish; a job that could still make it
  once running jobs end waits with an ETA (start, finish bound, what it waits for) and is dropped
  the moment its latest start passes, unless it is worth trying then ("Tries").
* Learning-aware kills: a running job past its deadline is killed (continuing only wastes
  capacity), unless it is small (``learn_cpus`` vcores or fewer) and its signature has fewer runs
  than the estimator needs (its completion is what teaches the estimator that signature). A
  killed run still teaches the estimator a lower bound of its work (``estimator``, "Killed
  runs"), so its history keeps the runs its bounds fell short of.
* First wave: a promised job whose bound was wrong need not hold its grant until its deadline.
  Its first wave's tasks show their duration as they run: ``RunningJob.task_floor_s`` is how
  long they have run without one ending (or what they took), so ``ceil(n / g)`` waves of tasks
  alike end no earlier than ``started + waves * floor``; once that is after its deadline the job
  is killed then, under the same learning exception. A one-wave job shows it only at its
  deadline. The caller supplies the observation (the simulator from its model, the live sidecar
  from the RM's container list for jobs that run one task per container); without one it is 0
  and only the deadline kill applies. On the evaluation grid (``docs/evaluation.md``) it cut
  WTR above 0.02 from 8 cells to none and raised SDR in 14 cells, lowering it in none.
* Tries (``_tries``): a job whose bound misses its deadline but that some of its history says
  would meet it is not hopeless. It is started on capacity free after the promised jobs when its
  chance of meeting the deadline, ``p`` (the share of its history samples whose work fits), is
  worth what a miss would waste (where its bound is the tighter of the estimator's two
  predictors', ``p`` is the smaller of the two chances: a try is a bet on a job its bound rules
  out, and its odds are not taken from the more hopeful predictor alone):
  ``p * mean_work > waste_price * (1 - p) * waste``, one met
  deadline against the work a miss burns before its kill, in units of the arrivals' mean work
  (SDR counts jobs, WTR counts work). The kill comes at the first wave's verdict (``_miss_waste``:
  the grant for its deadline over its waves), so a try of several waves risks that part of its
  window; priced at the whole window, jobs that a pooled bound asked the whole cluster for were
  never tried on half of it, and SWIM's 2x-mean Jockey1x2x fluid cells failed the goal
  (``docs/evaluation.md``, "Pricing a try's miss at its first-wave verdict"). Small jobs are
  tried on small chances, jobs that would hold much of the cluster only when nearly sure; one
  not worth trying even on all it could use is refused at once. Of the grants its history's
  works call for, a try takes the one worth most in met deadlines, its chance less the arrivals
  its hold crowds out (``_try_grant``, as ``_top_up`` chooses a promised job's grant), and none
  that crowds out as many as its chance; taking only the smallest grant with the largest chance
  left jobs waiting whose narrower grants were worth trying (``docs/evaluation.md``, "A try's
  grant worth most"). Without an arrival rate only
  jobs that run whole on ``learn_cpus`` vcores are tried, when their median fits. On the
  evaluation grid tries raised SDR in 52 of 112 cells and lowered it in none; WTR rose in 38,
  above 0.02 in eight (``docs/evaluation.md``).
  The first job that does not fit now, if its bound would fit the whole cluster but no start
  after the running jobs' bounded ends lets it finish in time, is tried too, on what is free now,
  when even their central ends leave it no start (waiting is then a bet on them ending early, at
  roughly even odds or worse) and its own chance is at least even; jobs behind it wait as before.
  Waiting for its promise, such a job was refused at its latest start: the largest class of jobs
  lost where the evaluation's goal missed (83 of 204, in 15 of 21 cells; ``docs/evaluation.md``,
  "Trying what waiting cannot save"). Like any try it may take vcores the first waiting job's
  ETA counted on.
* Promises after a wait (``_after_wait``): a job promised at its first round is promised on its
  bound, the deadline its user gave being a run the thesis assumes feasible from submission. A
  job that waited (held back for the arrivals it would crowd out, or behind tighter jobs) is
  promised on less than that window, and the wait spends the margin its bound had: the crowd-out
  rule holds a job back as if holding it lost it, and promising it later unpriced bet its whole
  grant on what was left. So it is priced as a try is, at the chance its history gives its grant
  by its deadline from now: the share of its runs whose work fits, a new run being as likely to
  fall in any of the gaps between them (``_share``; the last gap ends at the work its deadline
  allowed from its submission), so a wait costs its chance even where no run shows it. On the
  whole Google trace two one-wave jobs (10,500 and 2,000 tasks) had waited 2,236 and 596 s, were
  promised on bounds from pooled deadline ratios that every run fitted, and missed; each wasted
  enough to fail WTR in its cells, where started at submission each would have met
  (``docs/evaluation.md``, "Promises after a wait").
* Exploration (``_explore``): a job that would be refused, small (it runs whole on
  ``learn_cpus`` vcores or fewer) and of a signature with fewer runs than the estimator needs, is
  started on its tasks at its first round if they are free (else refused as its bound says).
  Its bound and its chance then come from other jobs' history (its user's, its queue's, the
  cluster's ratios); when those all miss its deadline, every new signature is refused, nothing
  runs, and nothing new is ever learned. In the simulator, with deadlines drawn from each
  template's typical run rather than the job's own, three early runs whose ratios all exceeded 1
  refused every later job of a run (``docs/evaluation.md``). Only at its first round, where the
  deadline its user gave is the run the thesis assumes feasible: started after a wait, such a job
  has less than its deadline, the history it borrows already says it misses, and the kill rule
  lets it run on to its end (small, still learning). A one-vcore job is small in vcores, not in
  work: on the 29-day Google file, whose jobs have one task each and many users, jobs explored
  after waiting wasted 55 % of a cell's work and met none of their deadlines
  (``docs/evaluation.md``, "Held out: the 29-day Google file").

``am_containers`` is booked per job on top of its task grant (YARN starts one ApplicationMaster
container per application that no task grant counts); the simulator's thesis model has none.
Pure: no I/O, no clock (``now_s`` is an argument).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from app.policies.base import ParamSpec, PolicyError, PolicySpec
from app.policies.promise.estimator import Estimate, Estimator
from app.policies.promise.signature import Keys

_EPS = 1e-9


def _at(t: float, now_s: float) -> str:
    """A time in a decision's reason, relative to the round (absolute times are epoch seconds
    live, which ``:g`` renders as 1.79564e+09; the ETA fields keep the absolute values)."""
    d = t - now_s
    return f"now+{d:.1f}s" if d >= 0 else f"now-{-d:.1f}s"


def waves(tasks: int, cpus: int, divisible: bool = False) -> float:
    """Task waves of ``tasks`` equal tasks on ``cpus`` containers: ``ceil(n / g)``, or ``n / g``
    when the work is ``divisible`` (``PromiseParams.divisible``)."""
    width = min(cpus, tasks)
    return tasks / width if divisible else -(-tasks // width)


def _count(w: float) -> str:
    """Waves in a reason: whole ones as they are, divisible ones to two decimals."""
    return str(w) if isinstance(w, int) else f"{w:.2f}"


def aligned(tasks: int, cpus: int, divisible: bool = False) -> int:
    """The fewest containers that give the same number of waves as ``cpus`` (with divisible
    work, every container shortens the run: all of them, up to the task count)."""
    if divisible:
        return min(cpus, tasks)
    return -(-tasks // -(-tasks // min(cpus, tasks)))


def min_grant(
    tasks: int, limit: int, task_s: float, time_left: float, divisible: bool = False
) -> int | None:
    """Smallest grant (``<= limit``) whose waves finish within ``time_left``; None if none."""
    if task_s <= 0:
        return 1
    fit = time_left / task_s + _EPS
    if fit < 1:
        return None  # not one task's duration left: no grant runs a task faster
    if divisible:
        g = max(1, math.ceil(tasks / fit))
    else:
        whole = math.floor(fit)
        g = -(-tasks // whole) if whole < tasks else 1
    return g if g <= limit else None


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
    # Its first wave is timed, so a miss ends at that wave's verdict (``_miss_waste``): every
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
    # took once they ended, a lower bound of a task's duration; 0: not observed (``admit``,
    # "first wave").
    task_floor_s: float = 0.0

    @property
    def deadline_at(self) -> float:
        """Absolute deadline."""
        return self.submitted_s + self.deadline_s


@dataclass(frozen=True, slots=True)
class PromiseParams:
    """Validated parameters (``make_params``)."""

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
    # for a job held back for the arrivals it would crowd out: how many (``_crowded_out``)
    crowd_out: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (audit and ETA)."""
        return {
            "id": self.job_id,
            "action": self.action,
            "cpus": self.cpus,
            "reason": self.reason,
            "start_s": self.start_s,
            "finish_s": self.finish_s,
            "finish_point_s": self.finish_point_s,
            "earliest_finish_s": self.earliest_finish_s,
            "waits_for": self.waits_for,
            "work_bound": self.work_bound,
            "source": self.source,
            "latest_start_s": self.latest_start_s,
            "crowd_out": self.crowd_out,
        }


def _estimate(est: Estimator, keys: Keys, tasks: int, deadline_s: float, cap: int) -> Estimate:
    return est.estimate(keys, tasks, deadline_s, min(tasks, cap))


def _timeline(free: int, releases: list[tuple[float, int]], now: float) -> list[tuple[float, int]]:
    """``(time, vcores free from then on)`` steps, starting with ``(now, free)``."""
    steps = [(now, free)]
    level = free
    for t, cpus in sorted(releases):
        level += cpus
        if t <= steps[-1][0] + _EPS:
            steps[-1] = (steps[-1][0], level)
        else:
            steps.append((t, level))
    return steps


def _earliest_finish(
    steps: list[tuple[float, int]], tasks: int, limit: int, task_s: float, am: int, div: bool
) -> tuple[float, float, int]:
    """Earliest (finish, start, grant) over the release steps with the largest grant available."""
    best = (math.inf, math.inf, 0)
    for t, level in steps:
        g = min(limit, level - am)
        if g < 1:
            continue
        g = aligned(tasks, g, div)
        fin = t + waves(tasks, g, div) * task_s
        if fin < best[0] - _EPS:
            best = (fin, t, g)
    return best


def _first_start(
    steps: list[tuple[float, int]],
    tasks: int,
    limit: int,
    task_s: float,
    due: float,
    am: int,
    div: bool,
) -> tuple[float, int, int] | None:
    """The first release step from which a grant finishes ``tasks`` of ``task_s`` by ``due``:
    ``(time, vcores spare beside it, grant)``; None if none does."""
    for t, level in steps:
        if task_s > 0 and (due - t) / task_s + _EPS < 1:
            return None  # not one wave fits, nor from any later step
        need = min_grant(tasks, limit, task_s, due - t, div)
        if need is not None and need + am <= level:
            return (t, level - need - am, need)
    return None


def admit(
    waiting: Sequence[WaitingJob],
    running: Sequence[RunningJob],
    free: int,
    capacity: int,
    now_s: float,
    estimator: Estimator,
    params: PromiseParams,
    load: Load | None = None,
) -> list[Decision]:
    """One admission round: kills first, then drops, then admits and queues (module docstring).

    ``load`` is the recent arrival rate (``LoadMeter``); without it no job is held back for the
    arrivals it would crowd out.
    """
    if capacity < 1:
        raise PolicyError("capacity", f"must be >= 1, got {capacity}")
    # Mean work of an arriving job: the unit a try's possible waste is priced in (``_tries``).
    mean_work = load.vcores / load.jobs_per_s if load is not None and load.jobs_per_s > 0 else None

    def triable(tasks: int) -> bool:
        """Whether a job may be tried at all: any, once a try's waste can be priced; without an
        arrival rate only one that runs whole on ``learn_cpus`` vcores (``_tries``)."""
        return mean_work is not None or tasks <= params.learn_cpus

    if not params.crowd_out:
        load = None
    if free < 0:
        raise PolicyError("free", f"must be >= 0, got {free}")
    am = params.am_containers
    div = params.divisible
    out: list[Decision] = []
    # (bounded end, vcores) of every running job, then also of each one admitted or tried this
    # round, in time order once the running jobs are in: what promises and ETAs plan on
    held: list[tuple[float, int]] = []
    # the same at their central ends, when each is as likely to have ended as not (a running
    # job already past its central end: at its bounded end): what the arrivals a hold crowds
    # out can expect to find (an expectation, as the hold is), and what decides whether
    # waiting for a promise is a bet worth making ("Tries")
    expected: list[tuple[float, int]] = []
    for r in running:
        est = _estimate(estimator, r.keys, r.tasks, r.deadline_s, capacity)
        w = waves(r.tasks, r.cpus, div)
        task_u = max(est.upper / r.tasks, r.task_floor_s)
        end_u = max(now_s, r.started_s + est.overhead_s + w * task_u)
        late = now_s - r.deadline_at
        # the earliest it can end if its tasks are alike: its waves, each at least as long as
        # its first wave's tasks have already run
        end_lb = r.started_s + w * r.task_floor_s
        if late > _EPS or (r.task_floor_s > 0 and end_lb > r.deadline_at + _EPS):
            why = (
                f"past its deadline by {late:g}s"
                if late > _EPS
                else f"its first tasks ran {r.task_floor_s:g}s without ending: "
                f"{_count(w)} waves end at {_at(end_lb, now_s)} at the earliest, "
                f"after its deadline {_at(r.deadline_at, now_s)}"
            )
            if r.cpus <= params.learn_cpus and _still_learning(estimator, r.keys):
                out.append(
                    Decision(
                        "keep",
                        r.id,
                        r.cpus,
                        f"{why}; kept: small, and its signature has fewer than "
                        f"{estimator.params.min_samples} runs to learn from",
                    )
                )
            else:
                free += r.cpus + am
                out.append(Decision("kill", r.id, r.cpus + am, f"{why}; it can no longer succeed"))
                continue
        held.append((end_u, r.cpus + am))
        task_c = max(est.point / r.tasks, r.task_floor_s)
        end_c = r.started_s + est.overhead_s + w * task_c
        # Past its central end a job is no longer as likely to have ended as not, and no run
        # says when it will: the end it is still known to keep is its bound's (counted as
        # ending now, its vcores were free to every arrival priced beside a hold)
        expected.append((end_c if end_c > now_s else end_u, r.cpus + am))

    cands: list[tuple[float, float, str, WaitingJob, Estimate, int]] = []
    # Jobs whose bound misses the deadline but that may still meet it (``_tries``).
    tries: list[_Try] = []
    for j in waiting:
        limit = min(j.tasks, capacity - am)
        est = _estimate(estimator, j.keys, j.tasks, j.deadline_s, capacity)
        task_u = est.upper / j.tasks
        if limit < 1:
            out.append(Decision("drop", j.id, 0, "the cluster cannot hold its AM and one task"))
            continue
        # Infeasible for certain (under its bound): not even the whole cluster from now on
        # finishes it in time. Running jobs' ends are bounds too, and a waiting job costs nothing,
        # so a job that would fit once they end is queued (its ETA says when), not dropped.
        # ``due``: the last moment its tasks may end, its start-up bound before the deadline
        due = j.deadline_at - est.overhead_s
        fin, start, best = _earliest_finish([(now_s, capacity)], j.tasks, limit, task_u, am, div)
        if fin > due + _EPS:
            cand = _try_of(j, est, limit, capacity, estimator, mean_work, div)
            lst_try = cand.lst
            # worth trying on the most it could ever get (all it can use, now); else refused now
            if (
                lst_try >= now_s - _EPS
                and triable(j.tasks)
                and _try_at(cand, limit, now_s, am, mean_work, params.waste_price, div) is not None
            ):
                tries.append(cand)
                continue
            fin += est.overhead_s
            refusal = Decision(
                "drop",
                j.id,
                0,
                f"cannot finish by its deadline {_at(j.deadline_at, now_s)}: at best {best} "
                f"vcores from {_at(start, now_s)} finish at {_at(fin, now_s)} ({est.source})",
                earliest_finish_s=fin,
                work_bound=est.upper,
                source=est.source,
            )
            # Refusing every job whose signature is still unknown can refuse them forever: what
            # bounds them is other jobs' history, and only runs teach the estimator. Only at
            # its first round, with its whole window ahead (module docstring, "Exploration").
            if (
                j.tasks <= params.learn_cpus
                and due > now_s + _EPS
                and j.at_first_round(now_s)
                and _still_learning(estimator, j.keys)
            ):
                tries.append(cand._replace(lst=now_s, explore=refusal))
                continue
            out.append(refusal)
            continue
        lst = due - waves(j.tasks, limit, div) * task_u
        cands.append((est.upper, lst, j.id, j, est, limit))
    # Least laxity first: a job that must start soon is offered capacity before one that can
    # wait; among equally urgent jobs, the smallest work bound first.
    cands.sort(key=lambda c: (c[1], c[0], c[2]))

    admitted: list[tuple[WaitingJob, Estimate, int, int]] = []  # job, est, limit, grant
    held.sort()
    expected.sort()
    queued: list[Decision] = []
    reservation: tuple[float, int, str] | None = None  # first blocked job: (start, spare, id)
    avail = free
    for _, lst, _, j, est, limit in cands:
        task_u = est.upper / j.tasks
        due = j.deadline_at - est.overhead_s
        g = min_grant(j.tasks, limit, task_u, due - now_s, div)
        if div and g is not None:
            # Divisible work (module docstring): the grant whole waves would need keeps their
            # margin; the exact grant, with the bound's quantile as its only margin, is
            # promised only when its miss is worth the risk.
            whole = min_grant(j.tasks, limit, task_u, due - now_s)
            if whole is not None and whole + am <= avail:
                g = whole
            elif g + am <= avail:
                chance = bound_chance(est.samples, estimator.params.quantile)
                if not _exact_worth(j, g, am, now_s, mean_work, params.waste_price, chance):
                    margin = f"{whole + am} vcores for its waves' margin" if whole else "capacity"
                    why = (
                        f"{margin}: on exactly the {g} its bound needs, a miss (about 1 in "
                        f"{1 / (1 - chance):.0f} for a bound from {est.samples} runs) would "
                        "waste more than its deadline is worth"
                    )
                    queued.append(_queued(j, est, lst, why))
                    continue
        fits = g is not None and g + am <= avail
        if fits and g is not None:
            left = _after_wait(
                j, est, g, am, now_s, mean_work, params.waste_price, estimator, capacity, div
            )
            if left is not None:
                why = (
                    f"capacity it can risk: its wait left it a chance of {left:.3f} by its "
                    f"{est.samples} runs, and a miss on {g + am} vcores would waste more than "
                    "its deadline is worth"
                )
                queued.append(_queued(j, est, lst, why))
                continue
            # expected hold (central estimate): the bound is for the job's own deadline, while
            # the arrivals it displaces are an expectation too
            lost = _hold_lost(j, est, g, load, avail, expected, now_s, am, div, capacity)
            if lost >= 1.0:
                why = (
                    f"capacity: holding {g + am} vcores would crowd out about {lost:.1f} "
                    "arriving jobs"
                )
                queued.append(_queued(j, est, lst, why)._replace(crowd_out=lost))
                continue
            admitted.append((j, est, limit, g))
            avail -= g + am
            bisect.insort(held, _release(j, est, g, now_s, am, div))
            bisect.insort(expected, _release(j, est, g, now_s, am, div, central=True))
            continue
        if reservation is None:
            # the first job that does not fit now: its expected start once running jobs end
            steps = _timeline(avail, held, now_s)
            res = _first_start(steps, j.tasks, limit, task_u, due, am, div)
            if res is None:
                # Waiting for its promise is a bet that running jobs end early, and a poor one
                # when even at their central estimates they leave it no start in time: trying
                # it now on what is free is the better bet when its history gives that even
                # odds or more ("Tries").
                if triable(j.tasks):
                    central = _timeline(avail, expected, now_s)
                    if _first_start(central, j.tasks, limit, task_u, due, am, div) is None:
                        cand = _try_of(j, est, limit, capacity, estimator, mean_work, div)
                        # Until its bound's latest start it stays a promise that may yet be
                        # kept; a try's own latest start can come sooner where its chance
                        # counts a more pessimistic predictor than its bound (``_try_of``).
                        tries.append(
                            cand._replace(
                                lst=max(cand.lst, lst),
                                min_p=0.5,
                                why="running jobs end too late",
                            )
                        )
                        continue
                queued.append(
                    _queued(
                        j,
                        est,
                        lst,
                        "running jobs to end before their bounds (no start after those "
                        "meets its deadline)",
                    )
                )
                continue
            t_res, spare, need = res
            reservation = (t_res, spare, j.id)
            fin = t_res + est.overhead_s + waves(j.tasks, need, div) * task_u
            queued.append(
                Decision(
                    "queue",
                    j.id,
                    0,
                    f"expects {need} vcores at {_at(t_res, now_s)}",
                    start_s=t_res,
                    finish_s=fin,
                    finish_point_s=t_res
                    + est.overhead_s
                    + waves(j.tasks, need, div) * est.point / j.tasks,
                    waits_for=f"{need + am} vcores to free up (running jobs ending)",
                    work_bound=est.upper,
                    source=est.source,
                    latest_start_s=lst,
                )
            )
            continue
        t_res, _, head = reservation
        queued.append(
            _queued(
                j, est, lst, f"vcores to free up (after {head}, expected at {_at(t_res, now_s)})"
            )
        )

    promised = len(out)
    avail = _tries(
        tries,
        avail,
        held,
        expected,
        am,
        now_s,
        out,
        queued,
        load,
        mean_work,
        params.waste_price,
        div,
        capacity,
    )
    grants = {j.id: g for j, _, _, g in admitted}
    top_ups: dict[str, str] = {}  # why a job got more than its bound needs
    # priced by the arrivals it would crowd out: none before any arrival, or with the rule off
    if load is not None and mean_work is not None and reservation is None:
        avail = _top_up(
            admitted, grants, top_ups, avail, expected, load, estimator, capacity, now_s, am, div
        )
    admits: list[Decision] = []
    for j, est, _, g0 in admitted:
        g = grants[j.id]
        w = waves(j.tasks, g, div)
        begin = now_s + est.overhead_s  # its first task, after the start-up bound
        finish = begin + w * est.upper / j.tasks
        more = f", {g - g0} more than its bound needs ({top_ups[j.id]})" if g > g0 else ""
        admits.append(
            Decision(
                "admit",
                j.id,
                g,
                f"{g} vcores: {_count(w)} waves finish by {_at(finish, now_s)} "
                f"<= deadline {_at(j.deadline_at, now_s)} ({est.source}){more}",
                start_s=now_s,
                finish_s=finish,
                finish_point_s=begin + w * est.point / j.tasks,
                work_bound=est.upper,
                source=est.source,
            )
        )
    out[promised:promised] = admits  # promises first, then tries, as they were decided
    out.extend(queued)
    return out


def _top_up(
    admitted: list[tuple[WaitingJob, Estimate, int, int]],
    grants: dict[str, int],
    notes: dict[str, str],
    avail: int,
    expected: list[tuple[float, int]],
    load: Load,
    estimator: Estimator,
    capacity: int,
    now_s: float,
    am: int,
    div: bool,
) -> int:
    """Give this round's promised jobs the vcores that no promise and no try took, where their
    own history says the larger grant is worth it (``grants`` and ``notes``, the reasons, are
    updated); returns the vcores still free.

    A job's work does not depend on its grant (``n`` tasks of their own durations on ``g``
    containers, or divisible work at ``work / g``): a larger grant holds more vcores for a
    shorter time and costs no work. Its bound is a quantile, so some of its history's works lie
    above it: the job's own evidence that it may run longer than promised (a run longer than its
    bound is killed at its first wave or at its deadline, the largest class of jobs lost where
    the goal failed on the evaluation's held-out slice after 3,000 jobs). A grant's worth is its
    chance of meeting the deadline, ``k / (n + 1)`` when ``k`` of the history's ``n`` predicted
    works fit it (as ``bound_chance`` counts a bound), less the arrivals it crowds out
    (``_crowded_out``), both counted in met deadlines. The candidates are the smallest grants
    that fit each of those works, up to what is free; the one of the best worth is taken if it
    beats the promised grant's. Jobs are topped up in the order they were promised (least laxity
    first). Topping every promise up to all that is idle met fewer deadlines
    (``docs/evaluation.md``, "Top-ups from the job's own history"): the next arrivals found the
    cluster full.
    """
    for j, est, limit, g in admitted:
        top = min(limit, g + avail)
        if top <= g:
            continue
        works = estimator.works(j.keys, j.tasks, j.deadline_s, min(j.tasks, capacity))
        due = j.deadline_at - est.overhead_s
        expected.remove(_release(j, est, g, now_s, am, div, central=True))
        spare = avail + g + am  # free without this job
        runs = len(works) + 1  # k of the n runs fit: a chance of k / (n + 1)
        asked = _asked_grants(j, works, limit, due, now_s, div)
        candidates = sorted({g} | {x for x in asked if g < x <= top})
        fitting = {x: _fits(j, works, due, now_s, x, div) for x in candidates}
        beside = (load, spare, expected, now_s, am, div, capacity)  # what every grant is priced on
        best, best_worth = g, -math.inf
        for grant in candidates:
            lost = _hold_lost(j, est, grant, *beside)
            worth = fitting[grant] / runs - lost
            if worth > best_worth + _EPS:
                best, best_worth = grant, worth
        # Beyond its history (module docstring, "Top-ups"): a bound from fewer runs than its
        # quantile needs is the largest of them, which a new run exceeds one time in n + 1 and
        # no run of its history says by how much. A wider grant finishes every run sooner, so
        # where no arrival of any size is expected to be turned away by the difference, the
        # job takes all it can use of the vcores left.
        widest = aligned(j.tasks, top, div)
        beyond = widest > best and _largest_run(est.samples, estimator.params.quantile)
        note = None
        if beyond and _hold_lost(j, est, widest, *beside, any_size=True) <= (
            _hold_lost(j, est, best, *beside, any_size=True) + _EPS
        ):
            best = widest
            note = (
                f"its bound is the largest of its {est.samples} runs, and no arrival is "
                "expected to need the rest"
            )
        if best > g:
            avail -= best - g
            grants[j.id] = best
            notes[j.id] = note or (
                f"{fitting[best]} of its {len(works)} history runs fit it, {fitting[g]} fit {g}"
            )
        bisect.insort(expected, _release(j, est, best, now_s, am, div, central=True))
    return avail


def _largest_run(samples: int, quantile: float) -> bool:
    """Whether a bound taken as the nearest-rank ``quantile`` of ``samples`` runs is the largest
    of them (``bound_chance``: ``k = n``, fewer runs than the quantile needs; a bound from no
    runs too)."""
    return math.ceil(quantile * samples - 1e-9) >= samples


def _release(
    j: WaitingJob, est: Estimate, g: int, now_s: float, am: int, div: bool, central: bool = False
) -> tuple[float, int]:
    """``(bounded end, vcores)`` of ``j`` promised ``g`` vcores now (``central``: its central
    end): its entry in a round's release timeline, built one way wherever it is added or taken
    out."""
    work = est.point if central else est.upper
    return (now_s + est.overhead_s + waves(j.tasks, g, div) * (work / j.tasks), g + am)


def _fits(
    j: WaitingJob, works: Sequence[float], due: float, now_s: float, grant: int, div: bool
) -> int:
    """How many of ``works`` (ascending) ``grant`` vcores finish by ``due`` from ``now_s``."""
    fit = (due - now_s) * j.tasks / waves(j.tasks, grant, div)
    return bisect.bisect_right(works, fit * (1 + 1e-12))


def _hold_lost(
    j: WaitingJob,
    est: Estimate,
    grant: int,
    load: Load | None,
    avail: int,
    held: list[tuple[float, int]],
    now_s: float,
    am: int,
    div: bool,
    capacity: int,
    *,
    any_size: bool = False,
) -> float:
    """The arrivals that ``grant`` vcores for ``j`` crowd out over its central hold
    (``_crowded_out``; ``avail``: what is free beside it now). ``any_size``: arrivals of every
    size count, not only those with less work than ``j``: what vcores beyond its history's need
    cost (``_top_up``), where the job is not what they would be traded for, so a larger arrival
    turned away is a met deadline lost too."""
    hold_s = waves(j.tasks, grant, div) * est.point / j.tasks
    work = math.inf if any_size else est.point
    return _crowded_out(load, avail, held, now_s, grant + am, hold_s, work, capacity)


class _Try(NamedTuple):
    lst: float  # latest start with any chance (its smallest predicted work)
    job: WaitingJob
    est: Estimate
    works: list[float]  # predicted work per history sample, ascending
    limit: int
    # Explored (small, its signature still unknown: started for what it teaches): the refusal
    # its bound gives, its answer if its vcores are not free
    explore: Decision | None = None
    min_p: float = 0.0  # the least chance it is tried on
    why: str = "its bound misses"  # why it is not promised (its reasons say)


def _try_of(
    j: WaitingJob,
    est: Estimate,
    limit: int,
    capacity: int,
    estimator: Estimator,
    mean_work: float | None,
    div: bool,
) -> _Try:
    """``j`` as a try: its history's predicted works and the latest start from which it may
    still meet its deadline (by its smallest predicted work, or its median where only small
    jobs are tried at their median)."""
    works = estimator.works(j.keys, j.tasks, j.deadline_s, min(j.tasks, capacity), cautious=True)
    lowest = works[0] if mean_work is not None else est.point
    due = j.deadline_at - est.overhead_s
    return _Try(due - waves(j.tasks, limit, div) * lowest / j.tasks, j, est, works, limit)


def _exact_worth(
    j: WaitingJob,
    g: int,
    am: int,
    now_s: float,
    mean_work: float | None,
    price: float,
    chance: float,
) -> bool:
    """Whether promising ``j`` on exactly the ``g`` vcores its bound needs is worth what a miss
    would waste, priced as a try is (``_tries``) with the bound's ``chance`` of holding
    (``bound_chance``): ``p * mean_work > price * (1 - p) * waste``. Without an arrival rate
    there is no price, and it is promised."""
    if mean_work is None:
        return True
    return _worth_risking(chance, mean_work, price, (g + am) * max(0.0, j.deadline_at - now_s))


def _worth_risking(p: float, mean_work: float, price: float, waste: float) -> bool:
    """The price of every risk Promise takes (a try, an exact grant, a promise after a wait): a
    met deadline, won with chance ``p``, against what a miss would waste, in the arrivals' mean
    work (``_tries``): ``p * mean_work > price * (1 - p) * waste``."""
    return p * mean_work > price * (1 - p) * waste


def _after_wait(
    j: WaitingJob,
    est: Estimate,
    g: int,
    am: int,
    now_s: float,
    mean_work: float | None,
    price: float,
    estimator: Estimator,
    capacity: int,
    div: bool,
) -> float | None:
    """The chance ``j``'s wait has left a promise on ``g`` vcores, when that is not worth what a
    miss would waste (module docstring, "Promises after a wait"); None when it is promised.

    The chance is the share of its history's works that fit (``_share``), up to the work its
    deadline allowed from its submission at full parallelism. A job at its first round, one
    whose bound comes from no runs (the bootstrap) and a round without an arrival rate are not
    priced (``WaitingJob.first_round``, or ``now_s`` at its submission). A miss wastes what
    ``_miss_waste`` says."""
    if mean_work is None or est.samples == 0 or j.at_first_round(now_s):
        return None
    limit = min(j.tasks, capacity)
    works = estimator.works(j.keys, j.tasks, j.deadline_s, limit)
    due = j.deadline_at - est.overhead_s
    feasible = (due - j.submitted_s) * j.tasks / waves(j.tasks, limit, div)
    p = _share(works, (due - now_s) * j.tasks / waves(j.tasks, g, div), feasible)
    return None if _worth_risking(p, mean_work, price, _miss_waste(j, g, am, now_s, div)) else p


def _miss_waste(j: WaitingJob, g: int, am: int, now_s: float, div: bool) -> float:
    """What ``j`` started now on ``g`` vcores wastes if it misses: its grant until the first
    wave's verdict (``first_wave_verdict_s``: its deadline over its waves), where the kill
    rule ends a miss; a job of one wave, or one whose first wave is not timed
    (``WaitingJob.timed``), shows it only at its deadline."""
    w = waves(j.tasks, g, div) if j.timed else 1
    return (g + am) * max(0.0, j.deadline_at - now_s) / w


def _share(works: Sequence[float], x: float, top: float) -> float:
    """The chance a new run's work is at most ``x``, from ``works`` (ascending): a new run is as
    likely to fall in each of the ``n + 1`` gaps the ``n`` runs leave (they are exchangeable),
    anywhere in it alike; the last gap ends at ``top`` (or the largest run, if larger)."""
    n = len(works)
    k = bisect.bisect_right(works, x)
    lo = works[k - 1] if k else 0.0
    hi = works[k] if k < n else max(top, works[-1])
    part = 1.0 if hi <= lo else min(1.0, max(0.0, (x - lo) / (hi - lo)))
    return (k + part) / (n + 1)


def bound_chance(samples: int, quantile: float) -> float:
    """The chance that a new run's work is at most a bound taken as the nearest-rank
    ``quantile`` of ``samples`` runs (``estimator.quantile``): of ``n`` exchangeable runs, the
    ``k = ceil(q * n)``-th smallest is at least a new one with probability ``k / (n + 1)``,
    whatever their distribution (3 runs: 0.75; 19: 0.95; 64: 61 / 65 = 0.94). A bound from no
    runs (the bootstrap: the whole deadline at full parallelism) counts as one run, an even
    chance."""
    n = max(1, samples)
    k = max(1, math.ceil(quantile * n - 1e-9))
    return k / (n + 1)


def _try_at(
    t: _Try, g_max: int, now_s: float, am: int, mean_work: float | None, price: float, div: bool
) -> tuple[int, float] | None:
    """``(grant, p)`` if trying ``t.job`` on at most ``g_max`` vcores from ``now_s`` is worth
    what a miss would waste (``_tries``), else None."""
    j, est = t.job, t.est
    if g_max < 1:
        return None
    due = j.deadline_at - est.overhead_s
    g_max = aligned(j.tasks, g_max, div)
    n_fit = _fits(j, t.works, due, now_s, g_max, div)
    if n_fit == 0:
        return None
    p = n_fit / len(t.works)
    if p < t.min_p:
        return None
    # the smallest grant on which the same runs of its history still fit
    g = min_grant(j.tasks, g_max, t.works[n_fit - 1] / j.tasks, due - now_s, div) or g_max
    if mean_work is None:
        return (g, p) if p >= 0.5 else None  # small jobs only (caller): their median fits
    worth = _worth_risking(p, mean_work, price, _miss_waste(j, g, am, now_s, div))
    return (g, p) if worth else None


def _asked_grants(
    j: WaitingJob, works: Sequence[float], limit: int, due: float, now_s: float, div: bool
) -> set[int]:
    """The grants of at most ``limit`` vcores that ``works`` ask for: for each, the smallest on
    which a run of that work meets ``due`` from ``now_s`` (none where no grant does)."""
    grants = (min_grant(j.tasks, limit, w / j.tasks, due - now_s, div) for w in works)
    return {g for g in grants if g is not None}


def _try_grant(
    t: _Try,
    g_max: int,
    avail: int,
    expected: list[tuple[float, int]],
    load: Load | None,
    now_s: float,
    am: int,
    mean_work: float | None,
    price: float,
    div: bool,
    capacity: int,
) -> tuple[int, float] | None:
    """``(grant, p)`` of the try of ``t.job`` worth most on at most ``g_max`` vcores now, else
    None. Only a job worth trying on the grant of its largest chance (``_try_at``) is tried at
    all; then, of the grants its history's works ask for (the smallest grant each of them
    fits), it takes the one whose chance less the arrivals it crowds out (``_crowded_out``, both
    in met deadlines, as a top-up's grant is chosen, ``_top_up``) is largest, among those whose
    chance is at least ``t.min_p``, whose miss is worth risking (``_worth_risking``) and which
    crowd out fewer arrivals than their chance. The rule before took only the grant of the
    largest chance and queued the job when that grant crowded out more than its chance, though
    a narrower one (a smaller chance, a smaller hold) could be worth its place. Trying narrower
    grants also when the widest is not worth its miss cost two grid cells a job each
    (``docs/evaluation.md``, "A try's grant worth most")."""
    j, est = t.job, t.est
    if g_max < 1:
        return None
    top = _try_at(t, g_max, now_s, am, mean_work, price, div)
    if top is None or mean_work is None:
        if (
            top is not None
            and _hold_lost(j, est, top[0], load, avail, expected, now_s, am, div, capacity)
            >= top[1]
        ):
            return None
        return top
    due = j.deadline_at - est.overhead_s
    g_top = top[0]
    asked = _asked_grants(j, t.works, g_top, due, now_s, div)
    candidates = sorted({g_top} | {g for g in asked if g < g_top})
    best: tuple[int, float] | None = None
    best_worth = -math.inf
    n = len(t.works)
    for g in candidates:
        p = _fits(j, t.works, due, now_s, g, div) / n
        if p <= 0 or p < t.min_p:
            continue
        if not _worth_risking(p, mean_work, price, _miss_waste(j, g, am, now_s, div)):
            continue
        lost = _hold_lost(j, est, g, load, avail, expected, now_s, am, div, capacity)
        if lost >= p:
            continue
        if p - lost > best_worth + _EPS:
            best, best_worth = (g, p), p - lost
    return best


def _tries(
    tries: list[_Try],
    avail: int,
    held: list[tuple[float, int]],
    expected: list[tuple[float, int]],
    am: int,
    now_s: float,
    out: list[Decision],
    queued: list[Decision],
    load: Load | None,
    mean_work: float | None,
    price: float,
    div: bool,
    capacity: int,
) -> int:
    """Start, with what the promised jobs left (``avail``; ``held``: when each running or
    admitted job releases its vcores), the jobs that cannot be promised (their bound misses
    their deadline, or running jobs end too late for it) but whose chance of meeting it is
    worth what a miss would waste.

    The bound is what keeps promises to the other jobs; a job that only its bound rules out is
    not hopeless. Its chance ``p`` of meeting the deadline on the vcores free now is the share of
    its history samples (the estimate's own distribution) whose work fits; if it misses it is
    killed at its first wave's verdict, having used its grant until then (``waste``,
    ``_miss_waste``: its deadline over its waves; one wave shows a miss only at the deadline,
    so a job that would hold much of the cluster in one wave risks all of it). It is tried
    when the expected gain beats the expected loss, in the same units SDR and WTR use: one met
    deadline is one job of the run, and wasted work counts against the run's work, so a miss's
    waste is worth ``waste / mean_work`` jobs (``mean_work``: the recent arrivals' mean work,
    from ``LoadMeter``). Hence ``p * mean_work > waste_price * (1 - p) * waste``: a one-vcore job
    is tried on a small chance, a job that would hold much of the cluster only when nearly sure.
    Its grant is the smallest that gives that chance; it must not crowd out arrivals worth more
    than ``p`` (``_crowded_out``). A try may ask for a least chance (``_Try.min_p``): a job that
    could still be promised if running jobs ended early is tried only on even odds or better.
    Without an arrival rate (``mean_work`` None) only jobs that run whole on ``learn_cpus``
    vcores are tried, when their median fits. A job not worth trying even on all it can use is
    refused at once (``admit``); one that is worth it but cannot start on what is free waits,
    holding no reservation, and is dropped once even its smallest predicted work can no longer
    finish in time. A tried job's ETA is its central estimate; it is killed at its first wave's
    verdict or its deadline like any other job.
    """
    for t in sorted(tries, key=lambda t: (t.lst, t.job.id)):
        j, est = t.job, t.est
        if t.explore is not None:
            avail = _explore(t, t.explore, avail, am, now_s, out)
            continue
        chosen = _try_grant(
            t,
            min(t.limit, avail - am),
            avail,
            expected,
            load,
            now_s,
            am,
            mean_work,
            price,
            div,
            capacity,
        )
        if chosen is None:
            queued.append(_queued(j, est, t.lst, f"vcores free enough to try it ({t.why})"))
            continue
        g, p = chosen
        avail -= g + am
        bisect.insort(held, _release(j, est, g, now_s, am, div))
        finish, _ = end = _release(j, est, g, now_s, am, div, central=True)
        bisect.insort(expected, end)
        out.append(
            _unpromised(
                j,
                est,
                g,
                now_s,
                finish,
                f"tried on {g} vcores ({t.why}; deadline {_at(j.deadline_at, now_s)}): "
                f"{p:.0%} of its history fits, central estimate finishes by {_at(finish, now_s)} "
                f"({est.source})",
            )
        )
    return avail


def _still_learning(estimator: Estimator, keys: Keys) -> bool:
    """Whether the signature has fewer runs than its own history needs: its jobs' runs are
    what teaches it (the kill rule keeps them running, exploration starts them)."""
    return estimator.samples(keys.signature) < estimator.params.min_samples


def _explore(
    t: _Try, refusal: Decision, avail: int, am: int, now_s: float, out: list[Decision]
) -> int:
    """Start a small job of a signature with too few runs of its own on all its tasks, if the
    vcores are free (module docstring, "Exploration"); else it gets ``refusal``, its bound's
    answer: it is explored only at its first round. Returns the vcores left."""
    j, est = t.job, t.est
    g = j.tasks
    if g + am > avail:
        out.append(refusal)
        return avail
    finish = now_s + est.overhead_s + est.point
    out.append(
        _unpromised(
            j,
            est,
            g,
            now_s,
            finish,
            f"explored on {g} vcores: no run of the history it borrows fits the deadline "
            f"{_at(j.deadline_at, now_s)}, but its own signature has too few runs to bound it; "
            f"its run teaches it ({est.source})",
        )
    )
    return avail - g - am


def _unpromised(
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


@dataclass(frozen=True, slots=True)
class Load:
    """Recent arrivals: jobs per second, the vcores their work asks for on average and, where
    known, how long they could wait (``Slack``) and how large they are (``Sizes``)."""

    jobs_per_s: float
    vcores: float
    slack: Slack | None = None
    sizes: Sizes | None = None
    # the arrivals' loss system, built as far as first needed (``_occupancy``): a round prices
    # many holds against the same load
    cache: dict[tuple[str, int, int], Any] = field(default_factory=dict, compare=False, repr=False)


# Arrivals whose slack the meter keeps: the estimator's default window, enough for the share of
# them below a wait to move in steps of under 2 %.
SLACK_WINDOW = 64


@dataclass(frozen=True, slots=True)
class Slack:
    """Recent arrivals' slack, ascending: the seconds each could have waited at its arrival and
    still finished by its deadline on its full parallelism (``slack_of``)."""

    values: tuple[float, ...]
    sums: tuple[float, ...]  # prefix sums of ``values``

    @classmethod
    def of(cls, values: Iterable[float]) -> Slack:
        """The distribution of ``values`` (any order)."""
        ordered = tuple(sorted(values))
        return cls(ordered, tuple(itertools.accumulate(ordered, initial=0.0)))

    def short_s(self, lo: float, hi: float) -> float:
        """``integral from lo to hi of P(slack < w) dw``: over arrivals spread evenly across a
        stretch whose waits for room run from ``lo`` to ``hi`` seconds, how long (in arrival
        time) those that cannot wait so long keep arriving."""
        values = self.values
        n = len(values)
        if n == 0 or hi <= lo or lo > values[-1]:  # nobody can wait that long
            return max(0.0, hi - lo)
        if hi <= values[0]:  # everybody can
            return 0.0
        below_lo = bisect.bisect_left(values, lo)
        below_hi = bisect.bisect_left(values, hi)
        between = self.sums[below_hi] - self.sums[below_lo]
        return (below_lo * (hi - lo) + (below_hi - below_lo) * hi - between) / n


@dataclass(frozen=True, slots=True)
class Sizes:
    """Recent arrivals, ascending by central work: each one's work (vcore-seconds) and need, the
    vcores it needs at once (``need_of``). A hold's cost is counted in jobs from these
    (``_crowded_out``), not as a share of the arrivals' mean demand: a few large jobs bring most
    of a trace's work, so a share of the work is not that share of the jobs."""

    works: tuple[float, ...]  # ascending, each at least 0
    needs: tuple[float, ...]  # in the order of ``works``

    @classmethod
    def of(cls, works: Iterable[float], needs: Iterable[float]) -> Sizes:
        """One work and one need per arrival, in any order (paired by position)."""
        pairs = sorted(zip((max(0.0, w) for w in works), needs, strict=True))
        return cls(tuple(w for w, _ in pairs), tuple(n for _, n in pairs))

    def smaller(self, work: float) -> int:
        """How many of the arrivals have less work than ``work``: the first that many."""
        return bisect.bisect_left(self.works, work)


# The loss system's vcores are counted in at most this many units (``_occupancy``): one unit
# is ``ceil(capacity / LOSS_UNITS)`` vcores, each arrival's need rounded up to whole units (and
# its count's mean scaled down to match, ``_classes``).
LOSS_UNITS = 256

# A Poisson count with at most this many terms within the units is added as shifted copies
# rather than convolved (``_occupancy``): cheaper for the large sizes, whose terms are few.
_SPARSE_TERMS = 8


@functools.cache
def _log_factorials(units: int) -> Any:
    """``log m!`` for ``m = 0 .. units`` (a numpy array): the same for every round of a cluster."""
    return np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, units + 1)))))


def _classes(load: Load, sizes: Sizes, unit: int, units: int) -> tuple[Any, Any]:
    """Each recent arrival's class in the loss system (``_occupancy``), as numpy arrays in the
    order of ``sizes``: its need in whole units, ``size`` (at least one), and its count's mean,
    ``rate * work / (size * unit)`` at ``rate = jobs_per_s / n`` (0 for an arrival needing
    nothing), so that what it occupies on average is its work per second whatever the unit.
    Built once per round (kept on ``load``).

    Rounding a need up to a whole unit must not add work: at ``rate * work / need`` a one-vcore
    arrival on a cluster counted in units of 14 vcores held 14 for its whole run, and the
    vcores beside a hold looked up to 14 times as full of such arrivals as they were
    (``docs/evaluation.md``, "The crowd-out estimate against what admitting did")."""
    key = ("classes", 0, unit)
    known = load.cache.get(key)
    if known is None:
        needs = np.array(sizes.needs, dtype=float)
        rate = load.jobs_per_s / len(sizes.works)
        size = np.maximum(1, np.ceil(needs / unit)).astype(int)
        positive = needs > 0
        # More calls offered than there are units fill the system alone; capped there, the
        # smallest terms of the counts stay within floating point (e^-units at worst).
        mean = rate * np.array(sizes.works) / np.where(positive, size * unit, 1.0)
        known = load.cache[key] = (size, np.where(positive, np.minimum(mean, units), 0.0))
    return known


def _band(elapsed_s: float) -> int:
    """The doubling band of a moment ``elapsed_s`` seconds after the round: 0 below 2 s, else
    ``m`` for ``2**m`` to ``2**(m + 1)`` seconds (``_occupancy``)."""
    return max(0, math.frexp(elapsed_s)[1] - 1) if elapsed_s >= 2.0 else 0


def _occupancy(
    load: Load, sizes: Sizes, k: int, unit: int, units: int, band: int | None = None
) -> Any:
    """The cumulative distribution of the units held by the ``k`` smallest recent arrivals, as a
    multi-rate loss system of ``units`` units (a numpy array over 0 .. units).

    Arrival ``i`` comes at rate ``jobs_per_s / n`` (the ``n`` recent arrivals alike), needs
    ``ceil(need / unit)`` units at once and holds them for its work over their vcores, its run
    on that many (``_classes``). Admitted when that many are free and lost otherwise, such
    arrivals' occupancy has a product form (Kaufman 1981; Roberts 1981): the convolution of one
    Poisson count per arrival, each of mean ``rate * duration`` and of its size in units,
    truncated to the units there are. Counts of one size add up to one Poisson count of their
    summed mean, so a prefix costs one convolution per size in it, not one per arrival; the
    distributions built are kept on ``load``, and a longer prefix starts from the longest one
    kept below it.

    ``band`` (``_band``; None: long after the round) reads the system that many seconds after
    the round, at the middle of the band: only arrivals since the round occupy it, one arriving
    at rate ``r`` for ``d`` seconds being there for ``min(d, t)`` of the last ``t``, so its
    count's mean is ``r * min(d, t)``. Those that arrived before the round are the running jobs,
    which the caller counts as held until their ends; read at once as the steady system, they
    were counted twice, as running jobs and as the arrivals that replace them, and a hold beside
    many short running jobs was priced as if they filled the cluster twice
    (``docs/evaluation.md``, "Arrivals since the round")."""
    in_units, offered = _classes(load, sizes, unit, units)
    upto = 0.0
    if band is not None:
        upto = load.jobs_per_s / len(sizes.works) * (1.5 * 2.0**band if band else 1.0)
        if upto >= _largest(load, offered, unit):  # every arrival's run fits since the round
            band = None  # the steady system
    # prefix length: its pmf and cdf; and the lengths built, ascending
    built: dict[int, tuple[Any, Any]]
    built, prefixes = load.cache.setdefault(
        ("occupancy", -1 if band is None else band, unit), ({}, [])
    )
    known = built.get(k)
    if known is not None:
        return known[1]
    if band is not None:  # capped only when built: a round reads each band's system many times
        offered = np.minimum(offered, upto)
    below = bisect.bisect_left(prefixes, k)
    start = prefixes[below - 1] if below else 0
    prefixes.insert(below, k)
    if start:
        pmf = built[start][0]
    else:
        pmf = np.zeros(units + 1)
        pmf[0] = 1.0
    # by size in units: the summed mean of the counts of the arrivals not yet in ``pmf``
    means = np.bincount(in_units[start:k], weights=offered[start:k]).tolist()
    present = tuple(size for size, mean in enumerate(means) if mean != 0)
    if present:
        pmf = _with_counts(pmf, [means[size] for size in present], present, units)
    cdf = np.cumsum(pmf)
    built[k] = (pmf, cdf)
    return cdf


def _with_counts(pmf: Any, means: list[float], present: tuple[int, ...], units: int) -> Any:
    """``pmf`` convolved with a Poisson count of each mean in ``means`` whose every call holds
    its size in ``present`` (ascending) units, truncated to ``units`` and normalised after each
    (``_occupancy``)."""
    # every class's count at once, each scaled to its largest term
    m, log_fact, offsets, lengths = _counts_of(units, present)
    log_p = m * np.repeat([math.log(mean) for mean in means], lengths) - log_fact
    counts = np.exp(log_p - np.repeat(np.maximum.reduceat(log_p, offsets), lengths))
    for size, first, n in zip(present, offsets.tolist(), lengths.tolist(), strict=True):
        count = counts[first : first + n]
        if n <= _SPARSE_TERMS:  # few terms far apart: shift and add
            out = pmf * count[0]
            for j in range(1, n):
                out[j * size :] += count[j] * pmf[: units + 1 - j * size]
        else:  # the convolution, as a correlation with the kernel laid out backwards
            back = _terms(units, size)[2]
            kernel = np.zeros(back[0] + 1)
            kernel[back] = count
            out = np.correlate(pmf, kernel, "full")[: units + 1]
        total = _sum(out)
        if total > 0:
            pmf = out / total
        else:  # nothing left within the units: the system is full
            pmf = np.zeros(units + 1)
            pmf[units] = 1.0
    return pmf


# ``ndarray.max`` and ``ndarray.sum`` without their Python wrappers (the same reductions): a
# round builds thousands of small systems, each a few reductions per class size
_max = np.maximum.reduce
_sum = np.add.reduce


@functools.cache
def _terms(units: int, size: int) -> tuple[Any, Any, Any]:
    """For the counts of a class of ``size`` units on ``units``: ``m = 0 .. units // size`` (its
    possible counts), ``log m!`` and where each count's term sits in its kernel laid out
    backwards (``_occupancy``); the same for every round of a cluster."""
    m = np.arange(units // size + 1)
    return m, _log_factorials(units)[m], m[-1] * size - m * size


# A few hundred sets of class sizes recur round after round; 4,096 kept held 36 MB more than
# the simulator's whole run needed for no gain in speed (``bench_sim.py``).
@functools.lru_cache(maxsize=256)
def _counts_of(units: int, present: tuple[int, ...]) -> tuple[Any, Any, Any, Any]:
    """``_terms`` of the class sizes ``present`` (ascending), laid end to end: their ``m`` and
    ``log m!``, where each class's terms start and how many it has."""
    terms = [_terms(units, size) for size in present]
    lengths = np.array([len(t[0]) for t in terms])
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    return (
        np.concatenate([t[0] for t in terms]),
        np.concatenate([t[1] for t in terms]),
        offsets,
        lengths,
    )


def _largest(load: Load, offered: Any, unit: int) -> float:
    """The largest of the recent arrivals' means ``offered`` (``_classes``), kept on ``load``."""
    key = ("largest", 0, unit)
    known = load.cache.get(key)
    if known is None:
        known = load.cache[key] = float(_max(offered))
    return float(known)


def _blocked(cdf: Any, sizes: Any, level: Any) -> Any:
    """The chance that each arrival of ``sizes`` units (a numpy array) is blocked by the
    occupancy ``cdf`` on ``level`` units: when fewer than its size are free. ``level`` may be an
    array of levels: then one row of chances per level."""
    levels = np.minimum(np.asarray(level), len(cdf) - 1)
    total = cdf[np.maximum(levels, 0)][..., None]
    room = levels[..., None] - sizes
    free = np.where(room >= 0, cdf[np.maximum(room, 0)], 0.0)
    # Below no units, or where the occupancy is never this low, every arrival finds it full.
    known = (levels[..., None] >= 0) & (total > 0)
    return np.where(known, 1.0 - free / np.where(known, total, 1.0), 1.0)


def need_of(
    est: Estimate, tasks: int, deadline_s: float, capacity: int, divisible: bool = False
) -> int:
    """The vcores a job needs at once to finish by its deadline if it starts at its submission:
    the smallest grant that does by its central estimate and start-up bound, else its full
    parallelism on the cluster (``Sizes``)."""
    limit = min(tasks, capacity)
    g = min_grant(tasks, limit, est.point / tasks, deadline_s - est.overhead_s, divisible)
    return limit if g is None else g


def slack_of(
    est: Estimate, tasks: int, deadline_s: float, capacity: int, divisible: bool = False
) -> float:
    """How long a job could wait at its submission and still finish by its deadline on its full
    parallelism, by its central estimate and start-up bound (0 if it could not wait at all)."""
    run_s = waves(tasks, min(tasks, capacity), divisible) * est.point / tasks
    return max(0.0, deadline_s - est.overhead_s - run_s)


@dataclass(slots=True)
class LoadMeter:
    """Exponentially decaying arrival rates with time constant ``tau_s`` (explicit clock), read
    over the time the meter has watched.

    The decayed sums read the time before the first arrival as time without arrivals: ``t``
    seconds into a run they say ``1 - exp(-t / tau)`` of a steady rate, a sixth of it 11 minutes
    in. Every simulated cell starts so, and so does a new sidecar; a hold priced on a sixth of
    the rate crowds out six times as many arrivals as it was charged for (``docs/evaluation.md``,
    "A meter that reads the time it has watched"). Divided by that share the sums are the rate
    over the watched time, but a few early arrivals then read as a rate (four in four seconds,
    one a second) that a run does not keep: read so from the first arrival, the grid met the
    goal in 99 cells instead of 107. So the correction is phased in with the arrivals counted,
    in full from ``SLACK_WINDOW`` of them on, the arrivals whose sizes and slack the meter keeps
    (the rate's relative error over ``n`` arrivals is about ``1 / sqrt(n)``, an eighth at 64)."""

    tau_s: float = 3600.0
    _t: float | None = None
    _start: float | None = None  # the earliest arrival counted: watched since then
    _counted: int = 0
    _jobs: float = 0.0
    _work: float = 0.0
    _slack: deque[float] = field(default_factory=lambda: deque(maxlen=SLACK_WINDOW))
    _slack_known: Slack | None = None  # ``Slack.of(_slack)`` until the next arrival
    _works: deque[float] = field(default_factory=lambda: deque(maxlen=SLACK_WINDOW))
    _needs: deque[float] = field(default_factory=lambda: deque(maxlen=SLACK_WINDOW))
    _sizes_known: Sizes | None = None  # ``Sizes.of(_works, _needs)`` until the next arrival

    def _decay(self, now_s: float) -> None:
        if self._t is not None and now_s > self._t:
            f = math.exp(-(now_s - self._t) / self.tau_s)
            self._jobs *= f
            self._work *= f
        self._t = now_s if self._t is None else max(self._t, now_s)

    def arrive(
        self, now_s: float, work: float, slack_s: float | None = None, need: float | None = None
    ) -> None:
        """Count one arrival whose work is expected to be ``work`` vcore-seconds, that could
        wait ``slack_s`` (``slack_of``) and needs ``need`` vcores at once (``need_of``); None:
        not known. An arrival older than the meter's clock (counted late) weighs what it would
        have decayed to; the slack and the sizes of the last ``SLACK_WINDOW`` arrivals counted
        are kept."""
        self._decay(now_s)
        assert self._t is not None
        self.watch_from(now_s)
        self._counted += 1
        weight = 1.0 if now_s >= self._t else math.exp(-(self._t - now_s) / self.tau_s)
        self._jobs += weight / self.tau_s
        self._work += weight * work / self.tau_s
        if need is not None:
            self._works.append(max(0.0, work))
            self._needs.append(need)
            self._sizes_known = None
        if slack_s is not None:
            self._slack.append(slack_s)
            self._slack_known = None

    def arrive_job(
        self,
        now_s: float,
        est: Estimate,
        tasks: int,
        deadline_s: float,
        capacity: int,
        divisible: bool = False,
    ) -> None:
        """Count one deadline job arriving at ``now_s`` from its estimate: its central work, its
        slack (``slack_of``) and its need (``need_of``). The simulator and the live meter both
        count arrivals this way."""
        slack = slack_of(est, tasks, deadline_s, capacity, divisible)
        need = need_of(est, tasks, deadline_s, capacity, divisible)
        self.arrive(now_s, est.point, slack, need)

    def watch_from(self, start_s: float) -> None:
        """Count the time since ``start_s`` as watched, if it is before every arrival counted
        (each arrival calls it; the live meter, rebuilt after a restart, calls it with the
        oldest submission it would have read, not the oldest it reads)."""
        self._start = start_s if self._start is None else min(self._start, start_s)

    def watched(self) -> float:
        """What the decayed sums are divided by: the share of a steady rate they hold after the
        time watched, ``1 - exp(-watched / tau)``, phased in over the first ``SLACK_WINDOW``
        arrivals (class docstring); 1 before any time has passed."""
        if self._start is None or self._t is None or self._t <= self._start:
            return 1.0
        held = -math.expm1(-(self._t - self._start) / self.tau_s)
        trust = min(1.0, self._counted / SLACK_WINDOW)
        return 1.0 / (1.0 + (1.0 / held - 1.0) * trust)

    def load(self, now_s: float) -> Load:
        """The rates as of ``now_s`` over the time watched (``watched``), with the recent
        arrivals' slack and sizes."""
        self._decay(now_s)
        share = self.watched()
        if self._slack_known is None and self._slack:
            self._slack_known = Slack.of(self._slack)
        if self._sizes_known is None and self._works:
            self._sizes_known = Sizes.of(self._works, self._needs)
        return Load(self._jobs / share, self._work / share, self._slack_known, self._sizes_known)


def _crowded_out(
    load: Load | None,
    avail: int,
    held: list[tuple[float, int]],
    now_s: float,
    hold: int,
    duration: float,
    work: float,
    capacity: int,
) -> float:
    """Arriving jobs expected to miss because a job of central work ``work`` holds ``hold``
    vcores for ``duration`` on a cluster of ``capacity``.

    What arrivals find beside it is ``avail`` now, plus what each job in ``held`` releases at its
    end (``(time, vcores)`` in time order: running jobs at their central ends, module
    docstring). Over each step of that timeline the recent arrivals with less work than this job
    (``Sizes.smaller``) are a loss system on the vcores left (``_occupancy``); the step costs how
    many more of them are blocked there than with ``hold`` more, times the jobs arriving
    meanwhile. An arrival is lost only if it cannot wait for the hold to end: one arriving at
    ``t`` is lost if its slack is shorter than the rest of the hold (``Slack.short_s``; with no
    slack known every one is). A job is worth one met deadline, so it waits when it would cost
    one or more (SDR counts jobs: one long job on most of the cluster can cost dozens of short
    ones). Why a loss system, and why only smaller arrivals: the module docstring. Without
    sizes (no arrival's need known) the arrivals are a fluid instead (``_crowded_out_fluid``).
    """
    if load is None or load.jobs_per_s <= 0 or load.vcores <= 0:
        return 0.0
    sizes = load.sizes
    if sizes is None:
        return _crowded_out_fluid(load, avail, held, now_s, hold, duration)
    k = sizes.smaller(work)
    if k == 0:
        return 0.0
    unit = max(1, math.ceil(capacity / LOSS_UNITS))
    units = math.ceil(capacity / unit)
    need = _classes(load, sizes, unit, units)[0][:k]  # each counted arrival's, in units
    end = now_s + duration
    slack = load.slack
    lost_s = 0.0  # seconds of arrivals (at the full rate) that cannot wait
    steps = _banded(_spare_steps(avail - hold, held, now_s, end), now_s)
    for band, group in itertools.groupby(steps, key=lambda step: step[3]):
        part = list(group)
        cdf = _occupancy(load, sizes, k, unit, units, band)
        spares = np.array([spare for _, _, spare, _ in part])
        # A hold makes no room for anyone: an arrival the loss system finds less often blocked
        # beside it is one that larger arrivals, turned away there, no longer crowd; in the
        # cluster those wait or come back, so that is not counted as a gain.
        both = _blocked(cdf, need, np.concatenate((spares // unit, (spares + hold) // unit)))
        more = both[: len(part)] - both[len(part) :]  # without the hold, less with it
        shares = np.maximum(more, 0.0).sum(axis=1) / len(sizes.works)  # of arrivals, per step
        for (a, b, _, _), share in zip(part, shares.tolist(), strict=True):
            if share > 0:
                lost_s += share * (b - a if slack is None else slack.short_s(end - b, end - a))
    return load.jobs_per_s * lost_s


def _banded(
    steps: list[tuple[float, float, int]], now_s: float
) -> list[tuple[float, float, int, int]]:
    """``steps`` (``_spare_steps``) cut where the time since ``now_s`` enters a new doubling
    band, each with its band (``_band``): the arrivals' system is read once per band."""
    out: list[tuple[float, float, int, int]] = []
    for a, b, spare in steps:
        t, band = a, _band(a - now_s)
        while t < b:
            upto = min(b, now_s + 2.0 ** (band + 1))
            if upto > t:  # rounding can put ``t`` on a band's end
                out.append((t, upto, spare, band))
            t, band = upto, band + 1
    return out


def _spare_steps(
    spare: int, held: list[tuple[float, int]], now_s: float, end: float
) -> list[tuple[float, float, int]]:
    """``(from, to, vcores free)`` from ``now_s`` until ``end``: ``spare`` at first, plus what
    each job in ``held`` (``(time, vcores)`` in time order) releases at its time. The interval
    form of ``_timeline``, cut at ``end``: a crowd-out estimate runs for every hold it prices
    and reads no release after the hold ends."""
    steps: list[tuple[float, float, int]] = []
    t = now_s
    for at, vcores in held:
        if at >= end:
            break
        if at > t:
            steps.append((t, at, spare))
            t = at
        spare += vcores
    if end > t:
        steps.append((t, end, spare))
    return steps


def _crowded_out_fluid(
    load: Load, avail: int, held: list[tuple[float, int]], now_s: float, hold: int, duration: float
) -> float:
    """``_crowded_out`` with no arrival's size known: the arrivals as a fluid of their mean
    demand (``load.vcores``). While what they find free (``avail`` less ``hold``, plus what
    ``held`` releases) is short of it, the part of that demand this job takes away,
    ``min(hold, demand - spare) / demand``, is the share of arrivals lost, if they cannot wait
    until the shortage ends (``Slack.short_s``)."""
    demand = load.vcores
    # the steps where the spare is short of the demand: the first ones, as releases only add
    short = [
        (a, b, min(hold, demand - spare) / demand)
        for a, b, spare in _spare_steps(avail - hold, held, now_s, now_s + duration)
        if spare < demand
    ]
    if not short:
        return 0.0
    room_at = short[-1][1]  # when arrivals find room again
    slack = load.slack
    lost_s = 0.0
    for a, b, share in short:
        lost_s += share * (b - a if slack is None else slack.short_s(room_at - b, room_at - a))
    return load.jobs_per_s * lost_s


def _queued(j: WaitingJob, est: Estimate, lst: float, waits_for: str) -> Decision:
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


def first_wave_verdict_s(r: RunningJob, divisible: bool = False) -> float:
    """When ``admit`` kills ``r`` if its first wave's tasks are still running then: from that
    moment its waves, each as long as the first has run, end after its deadline (the caller's
    next round after it is when the rule can act)."""
    return r.started_s + (r.deadline_at - r.started_s) / waves(r.tasks, r.cpus, divisible)


def booked_floor(running: Sequence[RunningJob], params: PromiseParams) -> int:
    """Vcores the deadline queue must keep: every admitted grant plus its AM containers. The
    queue controller takes this as the deadline queue's floor instead of rebalancing it."""
    return sum(r.cpus + params.am_containers for r in running)


PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "quantile",
        float,
        0.95,
        "quantile of a signature's history used as the work bound (the safety margin)",
        minimum=0.5,
        maximum=1.0,
    ),
    ParamSpec(
        "min_samples", int, 3, "runs a signature needs before its own history is used", minimum=1
    ),
    ParamSpec("window", int, 64, "most recent runs kept per signature", minimum=1),
    ParamSpec(
        "am_containers", int, 0, "containers booked per job for its ApplicationMaster", minimum=0
    ),
    ParamSpec(
        "startup_s",
        float,
        0.0,
        "start-up (admission to first task) assumed at least until the estimator has seen as "
        "many of the sidecar's own start-ups as its quantile needs (19 at 0.95)",
        minimum=0.0,
    ),
    ParamSpec(
        "crowd_out",
        bool,
        True,
        "hold back a job while it would crowd out one or more expected arrivals (maximises met "
        "deadlines by count; false favours large jobs' processed work)",
    ),
    ParamSpec(
        "learn_cpus",
        int,
        1,
        "small jobs: late jobs at or below this grant whose signature is still learning run on "
        "instead of being killed; jobs that run whole on this many vcores are tried when their "
        "bound misses the deadline but their central estimate meets it, when no arrival rate is "
        "known; and such jobs of a signature still learning are explored at their first round "
        "instead of refused (0: none of these)",
        minimum=0,
    ),
    ParamSpec(
        "waste_price",
        float,
        1.0,
        "tries: a job whose bound misses its deadline is started when its chance p of meeting it "
        "(the share of its history that fits) gives p * mean job work > waste_price * (1 - p) * "
        "the work a miss would waste; higher values waste less and try fewer jobs",
        minimum=0.0,
    ),
)

REGISTRY: tuple[PolicySpec, ...] = (
    PolicySpec(
        name="promise",
        kind="admission",
        summary="Promise: deadline admission from per-signature work bounds, wave-aware grants, "
        "least-laxity order with a reservation, honest early drops with the earliest finish.",
        paper="seed 004 (Dimopoulos, PhD thesis, UCSB 2018), chapters 4-5 (what it improves on); "
        "docs/evaluation.md",
        params=PARAMS,
    ),
)


def make_params(values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Validate ``values`` against the spec; returns every parameter with defaults filled in."""
    return REGISTRY[0].validate(values or {})


def promise_params(values: Mapping[str, Any]) -> PromiseParams:
    """The planner's part of the validated parameters."""
    return PromiseParams(
        int(values["am_containers"]),
        int(values["learn_cpus"]),
        bool(values["crowd_out"]),
        float(values["waste_price"]),
    )
