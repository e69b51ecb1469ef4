"""The risks Promise takes on jobs it cannot promise, each priced the same way (``_worth_risking``):
a met deadline won with some chance against the work a miss would waste. Pure: no I/O, no clock.

Tries (``start_tries``): a job whose bound misses its deadline but that some of its history says
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
(``docs/evaluation.md``, "Pricing a try's miss at its first-wave verdict"); a job whose
progress is read shows a miss ``PromiseParams.progress_s`` after its start at the latest
(``docs/evaluation.md``, "Ending a miss once its progress shows it"). Small jobs are
tried on small chances, jobs that would hold much of the cluster only when nearly sure; one
not worth trying even on all it could use is refused at once. Of the grants its history's
works call for, a try takes the one worth most in met deadlines, its chance less the arrivals
its hold crowds out (``_try_grant``, as ``core._top_up`` chooses a promised job's grant), and none
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

Promises after a wait (``after_wait``): a job promised at its first round is promised on its
bound, the deadline its user gave being a run the thesis assumes feasible from submission. A
job that waited (held back for the arrivals it would crowd out, or behind tighter jobs) is
promised on less than that window, and the wait spends the margin its bound had: the crowd-out
rule holds a job back as if holding it lost it, and promising it later unpriced bet its whole
grant on what was left. So it is priced as a try is, at the chance its history gives its grant
by its deadline from now: the share of its runs whose work fits, a new run being as likely to
fall in any of the gaps between them (``run_share``; the last gap ends at the work its deadline
allowed from its submission), so a wait costs its chance even where no run shows it. On the
whole Google trace two one-wave jobs (10,500 and 2,000 tasks) had waited 2,236 and 596 s, were
promised on bounds from pooled deadline ratios that every run fitted, and missed; each wasted
enough to fail WTR in its cells, where started at submission each would have met
(``docs/evaluation.md``, "Promises after a wait").

Exploration (``_explore``): a job that would be refused, small (it runs whole on
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
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import NamedTuple

from app.policies.promise.estimator import Estimate, Estimator
from app.policies.promise.grants import EPS, aligned, min_grant, waves
from app.policies.promise.loss import crowded_out
from app.policies.promise.model import (
    Decision,
    Round,
    WaitingJob,
    queue_decision,
    unpromised,
    when,
)
from app.policies.promise.signature import Keys


def fits(
    j: WaitingJob, works: Sequence[float], due: float, now_s: float, grant: int, div: bool
) -> int:
    """How many of ``works`` (ascending) ``grant`` vcores finish by ``due`` from ``now_s``."""
    fit = (due - now_s) * j.tasks / waves(j.tasks, grant, div)
    return bisect.bisect_right(works, fit * (1 + 1e-12))


def hold_lost(
    rnd: Round, j: WaitingJob, est: Estimate, grant: int, avail: int, *, any_size: bool = False
) -> float:
    """The arrivals that ``grant`` vcores for ``j`` crowd out over its central hold
    (``crowded_out``; ``avail``: what is free beside it now). ``any_size``: arrivals of every
    size count, not only those with less work than ``j``: what vcores beyond its history's need
    cost (``core._top_up``), where the job is not what they would be traded for, so a larger
    arrival turned away is a met deadline lost too."""
    hold_s = waves(j.tasks, grant, rnd.div) * est.point / j.tasks
    work = math.inf if any_size else est.point
    held, hold = rnd.expected, grant + rnd.am
    return crowded_out(rnd.load, avail, held, rnd.now_s, hold, hold_s, work, rnd.capacity)


class Try(NamedTuple):
    """A job that cannot be promised but may be started on a chance (``start_tries``)."""

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


def try_of(rnd: Round, j: WaitingJob, est: Estimate, limit: int) -> Try:
    """``j`` as a try: its history's predicted works and the latest start from which it may
    still meet its deadline (by its smallest predicted work, or its median where only small
    jobs are tried at their median)."""
    cap = min(j.tasks, rnd.capacity)
    works = rnd.estimator.works(j.keys, j.tasks, j.deadline_s, cap, cautious=True)
    lowest = works[0] if rnd.mean_work is not None else est.point
    due = j.deadline_at - est.overhead_s
    return Try(due - waves(j.tasks, limit, rnd.div) * lowest / j.tasks, j, est, works, limit)


def exact_worth(rnd: Round, j: WaitingJob, g: int, chance: float) -> bool:
    """Whether promising ``j`` on exactly the ``g`` vcores its bound needs is worth what a miss
    would waste, priced as a try is (``start_tries``) with the bound's ``chance`` of holding
    (``bound_chance``): ``p * mean_work > price * (1 - p) * waste``. Without an arrival rate
    there is no price, and it is promised."""
    if rnd.mean_work is None:
        return True
    waste = (g + rnd.am) * max(0.0, j.deadline_at - rnd.now_s)
    return _worth_risking(chance, rnd.mean_work, rnd.price, waste)


def _worth_risking(p: float, mean_work: float, price: float, waste: float) -> bool:
    """The price of every risk Promise takes (a try, an exact grant, a promise after a wait): a
    met deadline, won with chance ``p``, against what a miss would waste, in the arrivals' mean
    work (``start_tries``): ``p * mean_work > price * (1 - p) * waste``."""
    return p * mean_work > price * (1 - p) * waste


def after_wait(rnd: Round, j: WaitingJob, est: Estimate, g: int) -> float | None:
    """The chance ``j``'s wait has left a promise on ``g`` vcores, when that is not worth what a
    miss would waste (module docstring, "Promises after a wait"); None when it is promised.

    The chance is the share of its history's works that fit (``run_share``), up to the work its
    deadline allowed from its submission at full parallelism. A job at its first round, one
    whose bound comes from no runs (the bootstrap) and a round without an arrival rate are not
    priced (``WaitingJob.first_round``, or ``now_s`` at its submission). A miss wastes what
    ``_miss_waste`` says."""
    mean_work = rnd.mean_work
    if mean_work is None or est.samples == 0 or j.at_first_round(rnd.now_s):
        return None
    p = grant_chance(rnd, j, est, g)
    waste = _miss_waste(rnd, j, g)
    return None if _worth_risking(p, mean_work, rnd.price, waste) else p


def grant_chance(rnd: Round, j: WaitingJob, est: Estimate, g: int) -> float:
    """The chance ``g`` vcores from now finish ``j`` by its deadline: the share of its history's
    works that fit (``run_share``), the last gap ending at the work its deadline allowed from its
    submission at full parallelism (the run the thesis assumes feasible)."""
    div, limit = rnd.div, min(j.tasks, rnd.capacity)
    works = rnd.estimator.works(j.keys, j.tasks, j.deadline_s, limit)
    due = j.deadline_at - est.overhead_s
    feasible = (due - j.submitted_s) * j.tasks / waves(j.tasks, limit, div)
    return run_share(works, (due - rnd.now_s) * j.tasks / waves(j.tasks, g, div), feasible)


def _miss_waste(rnd: Round, j: WaitingJob, g: int) -> float:
    """What ``j`` started now on ``g`` vcores wastes if it misses: its grant until the kill
    rule ends the miss, at the first wave's verdict (``core.first_wave_verdict_s``: its deadline
    over its waves) or once its progress shows it (``PromiseParams.progress_s``; not for a
    job the rule keeps running, ``_kept``), whichever is sooner; a job whose tasks are not timed
    (``WaitingJob.timed``) shows it only at its deadline."""
    window = max(0.0, j.deadline_at - rnd.now_s)
    if j.timed:
        window /= waves(j.tasks, g, rnd.div)
        if rnd.params.progress_s > 0 and not _kept(rnd, j, g):
            window = min(window, rnd.params.progress_s)
    return (g + rnd.am) * window


def _kept(rnd: Round, j: WaitingJob, g: int) -> bool:
    """Whether the kill rule would keep ``j`` on ``g`` vcores running on once it shows a miss:
    small, and its signature still learning (``core._settle_running``)."""
    return g <= rnd.params.learn_cpus and still_learning(rnd.estimator, j.keys)


def run_share(works: Sequence[float], x: float, top: float) -> float:
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


def try_at(rnd: Round, t: Try, g_max: int) -> tuple[int, float] | None:
    """``(grant, p)`` if trying ``t.job`` on at most ``g_max`` vcores from ``now_s`` is worth
    what a miss would waste (``start_tries``), else None."""
    j, est, now_s, div, mean_work = t.job, t.est, rnd.now_s, rnd.div, rnd.mean_work
    if g_max < 1:
        return None
    due = j.deadline_at - est.overhead_s
    g_max = aligned(j.tasks, g_max, div)
    n_fit = fits(j, t.works, due, now_s, g_max, div)
    if n_fit == 0:
        return None
    p = n_fit / len(t.works)
    if p < t.min_p:
        return None
    # the smallest grant on which the same runs of its history still fit
    g = min_grant(j.tasks, g_max, t.works[n_fit - 1] / j.tasks, due - now_s, div) or g_max
    if mean_work is None:
        return (g, p) if p >= 0.5 else None  # small jobs only (caller): their median fits
    worth = _worth_risking(p, mean_work, rnd.price, _miss_waste(rnd, j, g))
    return (g, p) if worth else None


def asked_grants(
    j: WaitingJob, works: Sequence[float], limit: int, due: float, now_s: float, div: bool
) -> set[int]:
    """The grants of at most ``limit`` vcores that ``works`` ask for: for each, the smallest on
    which a run of that work meets ``due`` from ``now_s`` (none where no grant does)."""
    grants = (min_grant(j.tasks, limit, w / j.tasks, due - now_s, div) for w in works)
    return {g for g in grants if g is not None}


def _try_grant(rnd: Round, t: Try, g_max: int, avail: int) -> tuple[int, float] | None:
    """``(grant, p)`` of the try of ``t.job`` worth most on at most ``g_max`` vcores now, else
    None. Only a job worth trying on the grant of its largest chance (``try_at``) is tried at
    all; then, of the grants its history's works ask for (the smallest grant each of them
    fits), it takes the one whose chance less the arrivals it crowds out (``crowded_out``, both
    in met deadlines, as a top-up's grant is chosen, ``core._top_up``) is largest, among those whose
    chance is at least ``t.min_p``, whose miss is worth risking (``_worth_risking``) and which
    crowd out fewer arrivals than their chance. The rule before took only the grant of the
    largest chance and queued the job when that grant crowded out more than its chance, though
    a narrower one (a smaller chance, a smaller hold) could be worth its place. Trying narrower
    grants also when the widest is not worth its miss cost two grid cells a job each
    (``docs/evaluation.md``, "A try's grant worth most")."""
    j, est, now_s, div, mean_work = t.job, t.est, rnd.now_s, rnd.div, rnd.mean_work
    if g_max < 1:
        return None
    top = try_at(rnd, t, g_max)
    if top is None or mean_work is None:
        if top is not None and hold_lost(rnd, j, est, top[0], avail) >= top[1]:
            return None
        return top
    due = j.deadline_at - est.overhead_s
    g_top = top[0]
    asked = asked_grants(j, t.works, g_top, due, now_s, div)
    candidates = sorted({g_top} | {g for g in asked if g < g_top})
    best: tuple[int, float] | None = None
    best_worth = -math.inf
    n = len(t.works)
    for g in candidates:
        p = fits(j, t.works, due, now_s, g, div) / n
        if p <= 0 or p < t.min_p:
            continue
        if not _worth_risking(p, mean_work, rnd.price, _miss_waste(rnd, j, g)):
            continue
        lost = hold_lost(rnd, j, est, g, avail)
        if lost >= p:
            continue
        if p - lost > best_worth + EPS:
            best, best_worth = (g, p), p - lost
    return best


def start_tries(rnd: Round, tries: list[Try], avail: int) -> int:
    """Start, with what the promised jobs left (``avail``; the round's timelines: when each
    running or admitted job releases its vcores), the jobs that cannot be promised (their bound
    misses their deadline, or running jobs end too late for it) but whose chance of meeting it
    is worth what a miss would waste.

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
    than ``p`` (``crowded_out``). A try may ask for a least chance (``Try.min_p``): a job that
    could still be promised if running jobs ended early is tried only on even odds or better.
    Without an arrival rate (``mean_work`` None) only jobs that run whole on ``learn_cpus``
    vcores are tried, when their median fits. A job not worth trying even on all it can use is
    refused at once (``core.admit``); one that is worth it but cannot start on what is free waits,
    holding no reservation, and is dropped once even its smallest predicted work can no longer
    finish in time. A tried job's ETA is its central estimate; it is killed at its first wave's
    verdict or its deadline like any other job.
    """
    now_s, am = rnd.now_s, rnd.am
    for t in sorted(tries, key=lambda t: (t.lst, t.job.id)):
        j, est = t.job, t.est
        if t.explore is not None:
            avail = _explore(rnd, t, t.explore, avail)
            continue
        chosen = _try_grant(rnd, t, min(t.limit, avail - am), avail)
        if chosen is None:
            waits = f"vcores free enough to try it ({t.why})"
            rnd.queued.append(queue_decision(j, est, t.lst, waits))
            continue
        g, p = chosen
        avail -= g + am
        finish = rnd.hold(j, est, g)
        rnd.out.append(
            unpromised(
                j,
                est,
                g,
                now_s,
                finish,
                f"tried on {g} vcores ({t.why}; deadline {when(j.deadline_at, now_s)}): "
                f"{p:.0%} of its history fits, central estimate finishes by {when(finish, now_s)} "
                f"({est.source})",
            )
        )
    return avail


def still_learning(estimator: Estimator, keys: Keys) -> bool:
    """Whether the signature has fewer runs than its own history needs: its jobs' runs are
    what teaches it (the kill rule keeps them running, exploration starts them)."""
    return estimator.samples(keys.signature) < estimator.params.min_samples


def _explore(rnd: Round, t: Try, refusal: Decision, avail: int) -> int:
    """Start a small job of a signature with too few runs of its own on all its tasks, if the
    vcores are free (module docstring, "Exploration"); else it gets ``refusal``, its bound's
    answer: it is explored only at its first round. Returns the vcores left."""
    j, est, now_s, am = t.job, t.est, rnd.now_s, rnd.am
    g = j.tasks
    if g + am > avail:
        rnd.out.append(refusal)
        return avail
    finish = now_s + est.overhead_s + est.point
    rnd.out.append(
        unpromised(
            j,
            est,
            g,
            now_s,
            finish,
            f"explored on {g} vcores: no run of the history it borrows fits the deadline "
            f"{when(j.deadline_at, now_s)}, but its own signature has too few runs to bound it; "
            f"its run teaches it ({est.source})",
        )
    )
    return avail - g - am
