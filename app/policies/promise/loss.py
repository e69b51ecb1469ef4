"""Arrivals a hold would crowd out: the arrival meter and the multi-rate loss system that prices a
hold (``crowded_out``), for Promise (``core.admit``). Pure: no I/O, no clock.

Why: SDR counts jobs, and a long job on most of the cluster can cost dozens of later short ones. A
job waits while the arrivals it is expected to push out number one or more. The recent arrivals
(their rate over the time the meter has watched, and each one's need and central work, ``Sizes``)
are taken as a multi-rate loss system: each arrival needs its vcores at once and holds them for its
run, and is lost when they are not free. Its occupancy has a product form (Kaufman 1981; Roberts
1981), so what a hold costs is how much more often arrivals are blocked on the vcores left beside
it; none counts as better off for it (in a loss system small arrivals find more room where large
ones no longer fit, but in the cluster the large ones wait or come back). Those vcores grow as
running jobs end: what is free now plus what each running or just admitted job releases at its
central end, the hold and the arrivals being expectations too (at the bounded ends the ETAs plan
on, every running job of a pooled bound held its vcores to its deadline, and on the held-out slice
after 6,000 jobs the goal held in 106 cells instead of 109); a running job already past its central
end, no longer as likely to have ended as not, releases them at its bounded end (counted as ending
at once, a few such jobs left a hold's arrivals vcores the cluster did not have). The running jobs
are the arrivals that came before the round, so only those since occupy the loss system: ``t``
seconds in, one that runs ``d`` seconds is there for ``min(d, t)`` of them (``_occupancy``, read
once per doubling band of ``t``). Read as the steady system from the round, the arrivals were
counted twice, as running jobs and as the arrivals that replace them. Only arrivals with less
central work than the held job are counted, and only they occupy: a larger arrival is no better use
of the vcores (SDR counts jobs), and one like the held job meets the same test when it comes. An
arrival that can wait until the hold ends is not lost: the share of recent arrivals whose slack
(how long each could wait and still finish on its full parallelism) is shorter than that wait is
what counts. Counting arrivals as a fluid against their mean demand erred both ways
(``docs/evaluation.md``, "The crowd-out estimate, hold by hold"): it counted nothing lost once the
spare covered the mean, though arrivals with no slack block each other at random; and it counted
arrivals like the held job, which the same rule then held back in turn. On the evaluation's grid
the loss system met the goal in 107 of 112 cells instead of 103 ("Crowd-out as a loss system").

The recent arrivals are a sample, and a new arrival needs more vcores than every one counted
so far one time in ``n + 1`` (``_unseen``). While few have come that is often: on the Google
trace's first 757 s each of 31 arrivals needed one vcore, a try then took 316 of 400 vcores for
850 s at a price of no arrival, and the jobs of 9 to 198 tasks that came next found no room
(``docs/evaluation.md``, "Arrivals larger than any seen").
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.policies.promise.estimator import Estimate
from app.policies.promise.grants import min_grant, waves


@dataclass(frozen=True, slots=True)
class Load:
    """Recent arrivals: jobs per second, the vcores their work asks for on average and, where
    known, how long they could wait (``Slack``) and how large they are (``Sizes``)."""

    jobs_per_s: float
    vcores: float
    slack: Slack | None = None
    sizes: Sizes | None = None
    # every arrival the meter has counted, and the largest need among them (``_unseen``); 0:
    # not known, and no arrival is allowed for beyond the sizes
    seen: int = 0
    top_need: float = 0.0
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
    (``crowded_out``), not as a share of the arrivals' mean demand: a few large jobs bring most
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
    _top_need: float = 0.0  # the largest need counted (``Load.top_need``)
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
            self._top_need = max(self._top_need, need)
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
        return Load(
            self._jobs / share,
            self._work / share,
            self._slack_known,
            self._sizes_known,
            self._counted if self._works else 0,
            self._top_need,
        )


def crowded_out(
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
        for (a, b, spare, _), share in zip(part, shares.tolist(), strict=True):
            share += _unseen(load, spare, hold, capacity)
            if share > 0:
                lost_s += share * (b - a if slack is None else slack.short_s(end - b, end - a))
    return load.jobs_per_s * lost_s


def _unseen(load: Load, spare: int, hold: int, capacity: int) -> float:
    """The share of arrivals that a hold blocks by needing more vcores than any the meter has
    counted: of ``n`` exchangeable arrivals, a new one's need is the largest with chance
    ``1 / (n + 1)``, and none of them says by how much, so it is taken as equally likely
    anywhere above the largest seen up to the cluster. It is blocked by the hold alone when it
    needs more than the ``spare`` left beside it but no more than ``spare + hold``. Counted
    over every arrival since the meter started (``Load.seen``), not only the recent ones the
    loss system is built from: it matters while few have come."""
    top = load.top_need
    if load.seen < 1 or top >= capacity:
        return 0.0
    harmed = min(spare + hold, capacity) - max(spare, top)
    return max(0.0, harmed) / (capacity - top) / (load.seen + 1)


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
    form of ``grants.timeline``, cut at ``end``: a crowd-out estimate runs for every hold it prices
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
    """``crowded_out`` with no arrival's size known: the arrivals as a fluid of their mean
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
