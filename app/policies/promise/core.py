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
  (``exact_worth``), with the chance the bound holds from how many runs it was taken from
  (``bound_chance``: a 0.95 quantile of 3 runs is their largest, which a fourth exceeds one
  time in four); else a grant between the two, of what is free, whose margin raises that
  chance enough to be worth its miss (``_margin``); else the job waits. Exact grants everywhere
  wasted more than 0.02 in 21 of the 168 selection cells instead of 6 (``docs/evaluation.md``,
  "Planning divisible work in the fluid model"); waiting for the whole waves where part of
  their margin was free ("A margin of what is free") lost jobs that fair share met.
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
* Arrivals it would crowd out (``loss``): SDR counts jobs, and a long job on most of the cluster
  can cost dozens of later short ones, so a job waits while the arrivals it is expected to push
  out number one or more, priced as a multi-rate loss system of the recent arrivals, with an
  allowance for arrivals larger than any counted so far (one in ``n + 1`` after ``n``).
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
  is killed then, under the same learning exception. A one-wave job shows it this way only
  at its deadline (but see "Progress"). The caller supplies the observation (the simulator
  from its model, the live sidecar from the RM's container list for jobs that run one task per
  container); without one it is 0 and only the deadline kill applies. On the evaluation grid
  (``docs/evaluation.md``) it cut WTR above 0.02 from 8 cells to none and raised SDR in 14
  cells, lowering it in none.
* Progress: a job of one wave shows a miss sooner by its progress. ``RunningJob.progress_end_s``
  is when the rate between two of its progress readings ends it (``model.progress_end``); once
  that is after its deadline it is killed, under the same learning exception; otherwise it is
  the end the round expects (its vcores free then to the arrivals priced beside a hold). The
  caller supplies it (the simulator ``PromiseParams.progress_s`` after a start, the live
  sidecar from the RM's app progress for jobs that run one task per container); 0 where not
  seen.
* Risks on jobs it cannot promise (``risk``): tries of a job whose bound misses its deadline but
  some of its history meets it, promises after a wait, and exploration of a small job whose
  signature is still unknown, each started only when its chance is worth what a miss wastes.

``am_containers`` is booked per job on top of its task grant (YARN starts one ApplicationMaster
container per application that no task grant counts); the simulator's thesis model has none.
Pure: no I/O, no clock (``now_s`` is an argument).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from app.policies.base import ParamSpec, PolicyError, PolicySpec
from app.policies.promise.estimator import Estimate, Estimator
from app.policies.promise.grants import (
    EPS,
    aligned,
    count_waves,
    earliest_finish,
    first_start,
    min_grant,
    timeline,
    waves,
)
from app.policies.promise.loss import Load, LoadMeter
from app.policies.promise.model import (
    Decision,
    PromiseParams,
    Round,
    RunningJob,
    WaitingJob,
    queue_decision,
    release,
    when,
)
from app.policies.promise.risk import (
    Try,
    after_wait,
    asked_grants,
    bound_chance,
    exact_worth,
    fits,
    grant_chance,
    hold_lost,
    start_tries,
    still_learning,
    try_at,
    try_of,
)

# The planner's API: ``admit`` and the types it takes and returns.
__all__ = [
    "REGISTRY",
    "Decision",
    "Load",
    "LoadMeter",
    "PromiseParams",
    "RunningJob",
    "WaitingJob",
    "admit",
    "booked_floor",
    "first_wave_verdict_s",
    "make_params",
    "promise_params",
]


class _Candidate(NamedTuple):
    """A waiting job its bound says can finish in time, as a round offers it capacity."""

    lst: float  # latest start: its bound's waves on all it can use end at its deadline
    job: WaitingJob
    est: Estimate
    limit: int  # the most vcores it can use


class _Admitted(NamedTuple):
    """A job promised this round, on the grant its bound needs (before any top-up)."""

    job: WaitingJob
    est: Estimate
    limit: int
    grant: int
    margin: str  # why ``grant`` is wider than its bound needs (``_margin``), or ""


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
    if free < 0:
        raise PolicyError("free", f"must be >= 0, got {free}")
    mean_work = load.vcores / load.jobs_per_s if load is not None and load.jobs_per_s > 0 else None
    rnd = Round(now_s, capacity, estimator, params, load if params.crowd_out else None, mean_work)
    free = _settle_running(rnd, running, free)
    cands, tries = _triage(rnd, waiting)
    rnd.held.sort()
    rnd.expected.sort()
    admitted, reserved, avail = _promise(rnd, cands, tries, free)
    promised = len(rnd.out)
    avail = start_tries(rnd, tries, avail)
    grants = {a.job.id: a.grant for a in admitted}
    top_ups: dict[str, str] = {}  # why a job got more than its bound needs
    # priced by the arrivals it would crowd out: none before any arrival, or with the rule off
    if rnd.load is not None and mean_work is not None and not reserved:
        _top_up(rnd, admitted, grants, top_ups, avail)
    admits = [_admission(rnd, a, grants[a.job.id], top_ups.get(a.job.id)) for a in admitted]
    rnd.out[promised:promised] = admits  # promises first, then tries, as they were decided
    rnd.out.extend(rnd.queued)
    return rnd.out


def _settle_running(rnd: Round, running: Sequence[RunningJob], free: int) -> int:
    """Kill the running jobs that can no longer succeed (``_doomed``; small jobs still learning
    are kept), book the others' ends in the round's timelines, and return the vcores free once
    the kills take effect."""
    now_s, am, div = rnd.now_s, rnd.am, rnd.div
    for r in running:
        est = rnd.estimate(r.keys, r.tasks, r.deadline_s)
        w = waves(r.tasks, r.cpus, div)
        task_u = max(est.upper / r.tasks, r.task_floor_s)
        end_u = max(now_s, r.started_s + est.overhead_s + w * task_u)
        why = _doomed(r, w, now_s, rnd.params.progress_s)
        if why:
            if r.cpus <= rnd.params.learn_cpus and still_learning(rnd.estimator, r.keys):
                rnd.out.append(
                    Decision(
                        "keep",
                        r.id,
                        r.cpus,
                        f"{why}; kept: small, and its signature has fewer than "
                        f"{rnd.estimator.params.min_samples} runs to learn from",
                    )
                )
            else:
                free += r.cpus + am
                rnd.out.append(
                    Decision("kill", r.id, r.cpus + am, f"{why}; it can no longer succeed")
                )
                continue
        rnd.held.append((end_u, r.cpus + am))
        if r.progress_end_s > 0:
            end_c = r.progress_end_s  # what its own run says, not what its history does
        else:
            end_c = r.started_s + est.overhead_s + w * max(est.point / r.tasks, r.task_floor_s)
        # Past its central end a job is no longer as likely to have ended as not, and no run
        # says when it will: the end it is still known to keep is its bound's (counted as
        # ending now, its vcores were free to every arrival priced beside a hold)
        rnd.expected.append((end_c if end_c > now_s else end_u, r.cpus + am))
    return free


def _doomed(r: RunningJob, w: float, now_s: float, seen_s: float) -> str:
    """Why ``r``, running in ``w`` waves, can no longer meet its deadline, or "": it is past it,
    its first wave's tasks have run too long for its waves to end by it (tasks alike, each at
    least that long), or, once it has run ``seen_s`` (``PromiseParams.progress_s``: what a try's
    miss is priced at; a rate from its first seconds is the least steady), its progress ends it
    after it."""
    late = now_s - r.deadline_at
    if late > EPS:
        return f"past its deadline by {late:g}s"
    end_lb = r.started_s + w * r.task_floor_s
    if r.task_floor_s > 0 and end_lb > r.deadline_at + EPS:
        return (
            f"its first tasks ran {r.task_floor_s:g}s without ending: "
            f"{count_waves(w)} waves end at {when(end_lb, now_s)} at the earliest, "
            f"after its deadline {when(r.deadline_at, now_s)}"
        )
    if r.progress_end_s > r.deadline_at + EPS and now_s - r.started_s >= seen_s - EPS:
        return (
            f"its progress ends it at {when(r.progress_end_s, now_s)}, after its deadline "
            f"{when(r.deadline_at, now_s)}"
        )
    return ""


def _triage(rnd: Round, waiting: Sequence[WaitingJob]) -> tuple[list[_Candidate], list[Try]]:
    """The waiting jobs that can be promised, least laxity first, and those that can only be
    tried (their bound misses the deadline); the rest are refused now (in ``rnd.out``)."""
    cands: list[_Candidate] = []
    tries: list[Try] = []  # jobs whose bound misses the deadline but that may still meet it
    for j in waiting:
        limit = min(j.tasks, rnd.capacity - rnd.am)
        if limit < 1:
            rnd.out.append(Decision("drop", j.id, 0, "the cluster cannot hold its AM and one task"))
            continue
        est = rnd.estimate(j.keys, j.tasks, j.deadline_s)
        # ``due``: the last moment its tasks may end, its start-up bound before the deadline
        due = j.deadline_at - est.overhead_s
        task_u = est.upper / j.tasks
        # Infeasible for certain (under its bound): not even the whole cluster from now on
        # finishes it in time. Running jobs' ends are bounds too, and a waiting job costs nothing,
        # so a job that would fit once they end is queued (its ETA says when), not dropped.
        fin, start, best = earliest_finish(
            [(rnd.now_s, rnd.capacity)], j.tasks, limit, task_u, rnd.am, rnd.div
        )
        if fin > due + EPS:
            refusal = Decision(
                "drop",
                j.id,
                0,
                f"cannot finish by its deadline {when(j.deadline_at, rnd.now_s)}: at best "
                f"{best} vcores from {when(start, rnd.now_s)} finish at "
                f"{when(fin + est.overhead_s, rnd.now_s)} ({est.source})",
                earliest_finish_s=fin + est.overhead_s,
                work_bound=est.upper,
                source=est.source,
            )
            cand = _try_or_explore(rnd, j, est, limit, refusal)
            if cand is None:
                rnd.out.append(refusal)
            else:
                tries.append(cand)
            continue
        lst = due - waves(j.tasks, limit, rnd.div) * task_u
        cands.append(_Candidate(lst, j, est, limit))
    # Least laxity first: a job that must start soon is offered capacity before one that can
    # wait; among equally urgent jobs, the smallest work bound first.
    cands.sort(key=lambda c: (c.lst, c.est.upper, c.job.id))
    return cands, tries


def _try_or_explore(
    rnd: Round, j: WaitingJob, est: Estimate, limit: int, refusal: Decision
) -> Try | None:
    """``j``, whose bound misses its deadline, as a try when it is worth trying on the most it
    could ever get (all it can use, now), or as an exploration; None: refused now."""
    cand = try_of(rnd, j, est, limit)
    if (
        cand.lst >= rnd.now_s - EPS
        and rnd.triable(j.tasks)
        and try_at(rnd, cand, limit) is not None
    ):
        return cand
    # Refusing every job whose signature is still unknown can refuse them forever: what bounds
    # them is other jobs' history, and only runs teach the estimator. Only at its first round,
    # with its whole window ahead (``risk``, "Exploration").
    if (
        j.tasks <= rnd.params.learn_cpus
        and j.deadline_at - est.overhead_s > rnd.now_s + EPS
        and j.at_first_round(rnd.now_s)
        and still_learning(rnd.estimator, j.keys)
    ):
        return cand._replace(lst=rnd.now_s, explore=refusal)
    return None


def _promise(
    rnd: Round, cands: list[_Candidate], tries: list[Try], avail: int
) -> tuple[list[_Admitted], bool, int]:
    """Offer ``avail`` free vcores to ``cands`` in order: promise each the grant its bound needs
    where it fits and is worth it (``_grant_now``); the first that does not fit expects a start
    once running jobs end (``_expect``), and the jobs after it wait behind it. Returns the
    promised jobs, whether a job expects the free vcores (a reservation), and what is left."""
    admitted: list[_Admitted] = []
    head: tuple[float, str] | None = None  # the first blocked job's expected start, and its id
    for c in cands:
        g, queued, margin = _grant_now(rnd, c, avail)
        if g is not None:
            admitted.append(_Admitted(c.job, c.est, c.limit, g, margin))
            avail -= g + rnd.am
            rnd.hold(c.job, c.est, g)
        elif queued is not None:
            rnd.queued.append(queued)
        elif head is None:
            head = _expect(rnd, c, avail, tries)
        else:
            t_res, first = head
            waits = f"vcores to free up (after {first}, expected at {when(t_res, rnd.now_s)})"
            rnd.queued.append(queue_decision(c.job, c.est, c.lst, waits))
    return admitted, head is not None, avail


def _grant_now(rnd: Round, c: _Candidate, avail: int) -> tuple[int | None, Decision | None, str]:
    """``(grant, None, margin)`` if ``c`` is promised now (``margin``: why the grant is wider
    than its bound needs, or ""); ``(None, answer, "")`` if it fits but waits (its exact grant
    or a promise after its wait not worth the risk, or its hold crowding out arrivals);
    ``(None, None, "")`` if no grant that meets its deadline fits what is free."""
    j, est, lst, now_s, am = c.job, c.est, c.lst, rnd.now_s, rnd.am
    task_u = est.upper / j.tasks
    due = j.deadline_at - est.overhead_s
    g = min_grant(j.tasks, c.limit, task_u, due - now_s, rnd.div)
    note = ""
    if rnd.div and g is not None:
        picked = _divisible(rnd, c, g, avail, task_u, due - now_s)
        if isinstance(picked, Decision):
            return None, picked, ""
        g, note = picked
    if g is None or g + am > avail:
        return None, None, ""
    left = after_wait(rnd, j, est, g)
    if left is not None:
        why = (
            f"capacity it can risk: its wait left it a chance of {left:.3f} by its "
            f"{est.samples} runs, and a miss on {g + am} vcores would waste more than "
            "its deadline is worth"
        )
        return None, queue_decision(j, est, lst, why), ""
    # expected hold (central estimate): the bound is for the job's own deadline, while the
    # arrivals it displaces are an expectation too
    lost = hold_lost(rnd, j, est, g, avail)
    if lost >= 1.0:
        why = f"capacity: holding {g + am} vcores would crowd out about {lost:.1f} arriving jobs"
        return None, queue_decision(j, est, lst, why)._replace(crowd_out=lost), ""
    return g, None, note


def _divisible(
    rnd: Round, c: _Candidate, g: int, avail: int, task_u: float, left_s: float
) -> tuple[int, str] | Decision:
    """The grant of divisible work (module docstring) whose bound needs ``g`` vcores, and why
    it is wider than ``g`` (or ""); or the job's answer while it waits. The grant whole waves
    would need keeps their margin where it fits; otherwise the exact grant, with the bound's
    quantile as its only margin, is promised when its miss is worth the risk, and else a wider
    grant of what is free where one is worth it (``_margin``). A grant that does not fit is
    returned as it is, for the caller to find so."""
    j, est, am = c.job, c.est, rnd.am
    whole = min_grant(j.tasks, c.limit, task_u, left_s)
    if whole is not None and whole + am <= avail:
        return whole, ""
    chance = bound_chance(est.samples, rnd.estimator.params.quantile)
    if g + am > avail or exact_worth(rnd, j, g, chance):
        return g, ""
    miss = (
        f"on exactly the {g} its bound needs, a miss (about 1 in {1 / (1 - chance):.0f} for "
        f"a bound from {est.samples} runs) would waste more than its deadline is worth"
    )
    wider = _margin(rnd, c, g, avail)
    if wider is None:
        waits = f"{whole + am} vcores for its waves' margin" if whole else "capacity"
        return queue_decision(j, est, c.lst, f"{waits}: {miss}")
    x, p = wider
    return x, f"a margin: {miss}; on {x} its runs give it a chance of {p:.3f}"


def _margin(rnd: Round, c: _Candidate, g: int, avail: int) -> tuple[int, float] | None:
    """``(grant, chance)``: a grant of divisible work wider than the ``g`` its bound needs, where
    whole waves do not fit and a miss on ``g`` is not worth the risk; or None. Each vcore beyond
    ``g`` is margin: the bound ends sooner, and a run longer than the bound still meets the
    deadline while its work fits the grant, so the chance rises (``grant_chance``: past the
    largest run, up to the work the deadline allowed from submission). The vcores cost arrivals
    only where the spare they leave falls below an arrival's need, so the candidates are all
    that is free and the widest grants leaving room for each recent arrival's need. Of those
    whose miss is worth risking (``exact_worth``) and that crowd out less than one arrival, the
    one whose chance less the arrivals it crowds out is largest, as a top-up is chosen
    (``_top_up``)."""
    j, est, free = c.job, c.est, avail - rnd.am
    top = aligned(j.tasks, min(c.limit, free), True)
    if top <= g:
        return None
    sizes = rnd.load.sizes if rnd.load is not None else None
    needs = sizes.needs if sizes is not None else ()
    cands = {top} | {x for n in needs if g < (x := free - math.ceil(n)) < top}
    best, best_worth = None, -math.inf
    for x in sorted(cands):
        p = grant_chance(rnd, j, est, x)
        if not exact_worth(rnd, j, x, p):
            continue
        lost = hold_lost(rnd, j, est, x, avail)
        if lost < 1.0 and p - lost > best_worth + EPS:
            best, best_worth = (x, p), p - lost
    return best


def _expect(rnd: Round, c: _Candidate, avail: int, tries: list[Try]) -> tuple[float, str] | None:
    """The first job that does not fit now: queued with its expected start once running jobs
    end at their bounds, returned as the round's reservation ``(start, id)``; or, when no such
    start meets its deadline, tried now or queued without one (None)."""
    j, est, lst, now_s, am, div = c.job, c.est, c.lst, rnd.now_s, rnd.am, rnd.div
    task_u = est.upper / j.tasks
    due = j.deadline_at - est.overhead_s
    res = first_start(timeline(avail, rnd.held, now_s), j.tasks, c.limit, task_u, due, am, div)
    if res is None:
        # Waiting for its promise is a bet that running jobs end early, and a poor one when even
        # at their central estimates they leave it no start in time: trying it now on what is
        # free is the better bet when its history gives that even odds or more ("Tries").
        if rnd.triable(j.tasks):
            central = timeline(avail, rnd.expected, now_s)
            if first_start(central, j.tasks, c.limit, task_u, due, am, div) is None:
                cand = try_of(rnd, j, est, c.limit)
                # Until its bound's latest start it stays a promise that may yet be kept; a
                # try's own latest start can come sooner where its chance counts a more
                # pessimistic predictor than its bound (``try_of``).
                why = "running jobs end too late"
                tries.append(cand._replace(lst=max(cand.lst, lst), min_p=0.5, why=why))
                return None
        waits = "running jobs to end before their bounds (no start after those meets its deadline)"
        rnd.queued.append(queue_decision(j, est, lst, waits))
        return None
    t_res, _, need = res
    w = waves(j.tasks, need, div)
    rnd.queued.append(
        Decision(
            "queue",
            j.id,
            0,
            f"expects {need} vcores at {when(t_res, now_s)}",
            start_s=t_res,
            finish_s=t_res + est.overhead_s + w * task_u,
            finish_point_s=t_res + est.overhead_s + w * est.point / j.tasks,
            waits_for=f"{need + am} vcores to free up (running jobs ending)",
            work_bound=est.upper,
            source=est.source,
            latest_start_s=lst,
        )
    )
    return (t_res, j.id)


def _admission(rnd: Round, a: _Admitted, g: int, top_up: str | None) -> Decision:
    """The decision that admits ``a.job`` on ``g`` vcores (``a.grant`` and any top-up), with
    its ETA: its bound's waves from its start-up bound on."""
    j, est, now_s = a.job, a.est, rnd.now_s
    w = waves(j.tasks, g, rnd.div)
    begin = now_s + est.overhead_s  # its first task, after the start-up bound
    finish = begin + w * est.upper / j.tasks
    more = f", {g - a.grant} more than its bound needs ({top_up})" if g > a.grant else ""
    if a.margin:
        more = f", {a.margin}{more}"
    return Decision(
        "admit",
        j.id,
        g,
        f"{g} vcores: {count_waves(w)} waves finish by {when(finish, now_s)} "
        f"<= deadline {when(j.deadline_at, now_s)} ({est.source}){more}",
        start_s=now_s,
        finish_s=finish,
        finish_point_s=begin + w * est.point / j.tasks,
        work_bound=est.upper,
        source=est.source,
    )


def _top_up(
    rnd: Round,
    admitted: list[_Admitted],
    grants: dict[str, int],
    notes: dict[str, str],
    avail: int,
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
    (``loss.crowded_out``), both counted in met deadlines. The candidates are the smallest grants
    that fit each of those works, up to what is free; the one of the best worth is taken if it
    beats the promised grant's. Jobs are topped up in the order they were promised (least laxity
    first). Topping every promise up to all that is idle met fewer deadlines
    (``docs/evaluation.md``, "Top-ups from the job's own history"): the next arrivals found the
    cluster full.
    """
    now_s, am, div, capacity = rnd.now_s, rnd.am, rnd.div, rnd.capacity
    estimator, expected = rnd.estimator, rnd.expected
    for j, est, limit, g, _ in admitted:
        top = min(limit, g + avail)
        if top <= g:
            continue
        works = estimator.works(j.keys, j.tasks, j.deadline_s, min(j.tasks, capacity))
        due = j.deadline_at - est.overhead_s
        expected.remove(release(j, est, g, now_s, am, div, central=True))
        spare = avail + g + am  # free without this job
        runs = len(works) + 1  # k of the n runs fit: a chance of k / (n + 1)
        asked = asked_grants(j, works, limit, due, now_s, div)
        candidates = sorted({g} | {x for x in asked if g < x <= top})
        fitting = {x: fits(j, works, due, now_s, x, div) for x in candidates}
        best, best_worth = g, -math.inf
        for grant in candidates:
            lost = hold_lost(rnd, j, est, grant, spare)
            worth = fitting[grant] / runs - lost
            if worth > best_worth + EPS:
                best, best_worth = grant, worth
        # Beyond its history (module docstring, "Top-ups"): a bound from fewer runs than its
        # quantile needs is the largest of them, which a new run exceeds one time in n + 1 and
        # no run of its history says by how much. A wider grant finishes every run sooner, so
        # where no arrival of any size is expected to be turned away by the difference, the
        # job takes all it can use of the vcores left.
        widest = aligned(j.tasks, top, div)
        beyond = widest > best and _largest_run(est.samples, estimator.params.quantile)
        note = None
        if beyond and hold_lost(rnd, j, est, widest, spare, any_size=True) <= (
            hold_lost(rnd, j, est, best, spare, any_size=True) + EPS
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
        bisect.insort(expected, release(j, est, best, now_s, am, div, central=True))
    return avail


def _largest_run(samples: int, quantile: float) -> bool:
    """Whether a bound taken as the nearest-rank ``quantile`` of ``samples`` runs is the largest
    of them (``bound_chance``: ``k = n``, fewer runs than the quantile needs; a bound from no
    runs too)."""
    return math.ceil(quantile * samples - 1e-9) >= samples


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
    ParamSpec(
        "progress_s",
        float,
        20.0,
        "how long after its start a job whose tasks run one per container (MapReduce) shows when "
        "it will end from its progress (an allowance for its ApplicationMaster's start and two "
        "readings of the RM, one per admission tick); a job it shows ending after its deadline "
        "is killed, and a try's miss is priced as its grant for no longer (0: progress is not "
        "read)",
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
        progress_s=float(values["progress_s"]),
    )
