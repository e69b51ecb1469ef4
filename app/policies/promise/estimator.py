"""History-based work estimates per job signature (Justice's learning, seed 004 chapter 5, made
per job: 3Sigma and Jockey predict a recurring job from its own past runs, not from one global
fraction).

Per key (``signature.Keys.chain``: signature -> user+type -> queue -> global) the estimator keeps
the last ``window`` completed runs as two samples:

* ``task_s = work / tasks``: seconds of one task (absolute; predicts ``work = tasks * task_s``);
* ``ratio = work / (deadline * maxCPUs)``: the Justice/PYTHIA ``minReqRate`` (relative to the
  job's own deadline; predicts ``work = ratio * deadline * maxCPUs``). The global key's ratios are
  exactly the fractions Justice learns.

A prediction takes the ratio predictor from the most specific key with enough runs for its
quantile to be one of them (``q / (1 - q)``: 19 at 0.95; ``min_samples`` if more) and the
task-seconds predictor from the signature alone (across different jobs task seconds
spread over orders of magnitude). Each returns the empirical ``quantile`` of its key's samples
(nearest rank, rounding up, so the bound is a sample that was really seen). Which predictor bounds
a job is itself learned: each completion scores both predictors' bounds against the real work at
the job's signature with the quantile (pinball) loss of the bound's level, the proper score of a
quantile forecast (Koenker and Bassett 1978; Gneiting and Raftery 2007), and the one with the
smaller mean loss bounds; until both have ``min_samples`` scores the ratio predictor is used.
A third candidate is scored beside them: for each job the smaller of the two bounds, each taken
at the ``1 - (1 - q) / 2`` quantile so that the work exceeds neither with probability at least
``q`` (Bonferroni, where each has the runs for its own coverage: 39 at 0.95; with fewer it is
taken on its record alone), which bounds a signature's jobs once its loss is the smallest of the
three, after ``min_samples`` scored runs like the other two. A signature's ratios come from its
own runs once it has enough of them and from its user's, queue's or the cluster's before (or
where killed runs leave its own without a bound), and pooled ratios can bound its jobs far less
tightly than its own: the ratio predictor and the tighter bound are scored apart for the two
sources (``_slots``), and a job is judged on the record of the source that bounds it now, or on
both together while that source has fewer than ``min_samples`` scores.
Neither predictor alone is tight where some deadlines carry the run and others do not (a
deadline that is the job's run makes its ratio bound the work itself, while a loose one makes
it twice the work, where the task seconds bound the same job within their scatter);
``docs/evaluation.md``, "The tighter of the two bounds". The chance of a try of such a job (a
bet on a job its bound rules out) comes from both (``works(cautious=True)``: the larger of the
two predictions at each rank), not from the more hopeful one.
Admission plans with the bound, so the bound is what is scored: at ``q = 0.95`` a bound below
the work (a promise that may miss) costs 19 times as much per log unit as one above it (a drop
or a larger grant). The central value (``point``: the ETA's, the error statistics of ``error``
and ``GET /estimator``) comes from the predictor whose medians had the smaller mean absolute log
error, capped at the bound; the two choices can differ (``docs/evaluation.md``, "Scoring the
bound, not the median": choosing both by the median, the rule before, met fewer deadlines, and
choosing both by the bound left more predictions off by 2x).

Deadlines of one signature: a ratio is relative to its run's deadline, and how much of its
deadline a recurring job needs depends on how tight that deadline is (a loose deadline, twice the
run, gives 0.5; a tight one, the run itself, 1). Over a signature's whole window the quantile is
the tight runs' ratio as soon as more than ``1 - q`` of them are tight, and every loose job is then
bounded as needing its whole deadline at full parallelism. So at the signature the ratio
predictor takes the ``_support`` runs (19 at 0.95) whose deadlines were nearest the job's, in log
distance (``_Series.near``; a local quantile, as in nearest-neighbour quantile regression): a
loose job is bounded by runs that were loose, a tight one by runs that were tight, and where
deadlines say nothing of the work (they follow a template, not the run) the nearest runs are a
sample of the window like any other. Where killed runs among them leave the quantile unknown the
signature's ratios bound nothing and the next key's answer, as for a whole window. The keys
below the signature pool different jobs, whose deadlines are not comparable, and keep their
whole windows. ``docs/evaluation.md``, "Ratios of the runs due nearest".

With no history anywhere the bound is the thesis' own assumption (seed 004, 5.2.1): the job needs
its whole deadline at full parallelism (ratio 1), the deadline being what is left after its
start-up bound (so a job with no history is still feasible from its submission, as the thesis
assumes, and not dropped for the start-up its deadline did not count).

Start-up: on YARN a job's first task starts seconds after its admission (the ApplicationMaster is
allocated and launched, then asks for its containers); its ``work`` counts task containers only.
Where an outcome reports that delay (``overhead_s``: the live sidecar's own jobs, whose grants are
known; the simulator's model has none) the estimator keeps it per key like the others and each
estimate carries its quantile along the whole chain (``Estimate.overhead_s``). Foreign apps teach
no start-up (their grants, hence their waves, are unknown), so a new sidecar knows none: until it
has seen as many start-ups as its quantile needs (``_support``, 19 at 0.95) the bound is at least
``startup_s``, the prior the operator configures (10 s live, 0 in the simulator). Without it the
first burst a sidecar admits is planned as if tasks started at admission: on the real mini
cluster, whose start-ups take 4 to 5 s, a 3-task job promised 3 waves of 8.95 s for its 30 s
deadline took 29.4 s, and missed in a run on a busier machine.

Killed runs: admission kills a run that its first wave shows will miss, or that passes its
deadline, and such a run never ends to report its work. Learning only the runs that ended would
bias each key's history against its largest runs, the very ones its bounds fell short of: a
signature whose deadlines are mostly loose and sometimes tight learns only the loose runs' ratio,
and every tight run is promised half its work and killed again (the window forgets the last
tight run that ended). So a killed run is learned as a lower bound of its work
(``Outcome.censored``: what it had used, or its tasks times how long its first wave had run
without ending) and each quantile is the product-limit (Kaplan and Meier 1958) one,
``censored_quantile``: a lower bound counts among the runs at risk up to its value, and when the
runs known to be larger than every ended one are more than ``1 - q`` of a window, that window
bounds nothing (its predictor does not answer from that key; the ratio predictor takes the next key
of the chain). A try's chances count a killed run as never fitting (``works``). Killed runs
score no prediction: their work is not known.

Calibration: before a completion is added, its work over the bound it would have had (the
bounding predictor's ``upper``) is kept too, the last ``OVERRUN_WINDOW`` over every signature.
Admission's promises rest on the bounds holding as often as their quantile says (19 times in 20
at 0.95); ``totals`` reports how often the kept runs exceeded theirs, so an operator sees when
they do not (``GET /estimator``, ``prediction_error.above_bound``). Using these overruns to
price larger grants beyond a job's history was measured and not kept (``docs/evaluation.md``).

Errors: before a completion is added, the point prediction it would have had is compared with the
real work; per signature the estimator counts predictions off by 2x or more (3Sigma's measure) and
the mean absolute log error. The object is mutable for speed (the simulator learns 10^4 times per
run) but does no I/O and reads no clock; learning the same outcomes in the same order always
gives the same state.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from app.policies.base import PolicyError
from app.policies.promise.signature import GLOBAL, Keys


@dataclass(frozen=True, slots=True)
class Outcome:
    """A completed run: what the estimator learns from."""

    keys: Keys
    tasks: int
    work: float  # vcore-seconds (the RM's vcoreSeconds)
    deadline_s: float | None
    max_cpus: int  # min(tasks, capacity) when it ran
    overhead_s: float | None = None  # admission to first task (module docstring); None: unknown
    # ``work`` is only a lower bound: the run was killed before it ended (module docstring,
    # "Killed runs").
    censored: bool = False

    def __post_init__(self) -> None:
        if self.tasks < 1:
            raise PolicyError("outcome.tasks", f"must be >= 1, got {self.tasks}")
        if not (math.isfinite(self.work) and self.work > 0):
            raise PolicyError("outcome.work", f"must be a finite number > 0, got {self.work}")
        if self.max_cpus < 1:
            raise PolicyError("outcome.max_cpus", f"must be >= 1, got {self.max_cpus}")
        if self.overhead_s is not None and not (
            math.isfinite(self.overhead_s) and self.overhead_s >= 0
        ):
            raise PolicyError(
                "outcome.overhead_s", f"must be a finite number >= 0, got {self.overhead_s}"
            )


@dataclass(frozen=True, slots=True)
class Estimate:
    """Work of one job: the planning bound (``upper``) and the central value (``point``)."""

    upper: float
    point: float
    source: str  # which key and predictor gave the bound, for the audit trail
    samples: int
    overhead_s: float = 0.0  # start-up before the first task (bound; module docstring)

    def task_seconds(self, tasks: int) -> float:
        """Upper bound on one task's duration (work spread evenly over the tasks)."""
        return self.upper / tasks


class _Prediction(NamedTuple):
    """One predictor's estimate, the samples it comes from and their scale (work = scale x
    sample): ``Estimator.works`` is the whole distribution the bound is a quantile of."""

    est: Estimate
    data: Sequence[float]
    scale: float
    series: _Series | None = None  # where ``data`` is kept, None for the bootstrap
    which: int = 0  # its window there (``_Series.quantile``)
    # the tighter bound's other prediction, whose bound was larger (``Estimator._tighter``)
    other: _Prediction | None = None
    # ratios from a key below the job's signature (its user's, queue's or the cluster's)
    pooled: bool = False


@dataclass(slots=True)
class _Series:
    task_s: deque[float]
    ratio: deque[float]
    overhead: deque[float]
    # In step with ``task_s`` and ``ratio``: whether each sample is only a lower bound (a killed
    # run, ``Outcome.censored``).
    task_cut: deque[bool]
    ratio_cut: deque[bool]
    # In step with ``ratio``: the log of the deadline each ratio is relative to (module
    # docstring, "Deadlines of one signature"), kept as the log ``near`` measures distance in.
    ratio_log_dl: deque[float]
    runs: int = 0
    off_2x: int = 0
    abs_log_err: float = 0.0
    errors: int = 0
    # per predictor (0: task seconds, 1: ratio, 2: the tighter of their two bounds; 3 and 4:
    # the ratio and the tighter bound where the ratios were pooled from a key below the
    # signature, ``_slots``): predictions scored, and their abs log errors (the tighter bound
    # has no median of its own)
    scored: list[int] = field(default_factory=lambda: [0] * 5)
    scored_err: list[float] = field(default_factory=lambda: [0.0] * 5)
    # ... and their bounds' quantile losses (``_bound_loss``)
    scored_loss: list[float] = field(default_factory=lambda: [0.0] * 5)
    # Quantiles of the windows above by (window, q), until the next run is learned: a round
    # estimates every waiting job, thousands of them sharing a few keys, and each estimate
    # sorted the same windows again.
    memo: dict[tuple[int, float], float | None] = field(default_factory=dict)

    def quantile(self, which: int, q: float) -> float | None:
        """``quantile`` of window ``which`` (0: task seconds, 1: ratios, 2: start-ups); with
        killed runs among its samples, ``censored_quantile``, None where they leave it unknown."""
        key = (which, q)
        if key in self.memo:
            return self.memo[key]
        data = (self.task_s, self.ratio, self.overhead)[which]
        if which < 2 and any(cut := (self.task_cut, self.ratio_cut)[which]):
            value = censored_quantile(data, cut, q)
        else:
            value = quantile(data, q)
        self.memo[key] = value
        return value

    def values(self, which: int) -> Sequence[float]:
        """Window ``which`` (0 or 1) with each killed run's sample as infinite work: a chance
        counted from it (``Estimator.works``) never counts on a run that did not end."""
        data, cut = ((self.task_s, self.task_cut), (self.ratio, self.ratio_cut))[which]
        if not any(cut):
            return data
        return [math.inf if c else v for v, c in zip(data, cut, strict=True)]

    def near(self, deadline_s: float, k: int) -> _Series:
        """A series of the ``k`` ratios whose deadlines are nearest ``deadline_s`` (in log
        distance, the newer run first on a tie), with their killed-run flags: the ratios of
        this signature's runs that had deadlines like this job's. Itself when it holds no more
        than ``k``."""
        n = len(self.ratio)
        if n <= k:
            return self
        at, logs = math.log(deadline_s), self.ratio_log_dl
        # newest first into a stable sort: of runs equally near, the newer is taken
        nearest = sorted(sorted(range(n - 1, -1, -1), key=lambda i: abs(logs[i] - at))[:k])
        return _Series(
            deque(),
            deque(self.ratio[i] for i in nearest),
            deque(),
            deque(),
            deque(self.ratio_cut[i] for i in nearest),
            deque(logs[i] for i in nearest),
        )

    def append(self, which: int, value: float, censored: bool) -> None:
        """Add a sample to window ``which`` (0 or 1) with whether it is a lower bound."""
        data, cut = ((self.task_s, self.task_cut), (self.ratio, self.ratio_cut))[which]
        data.append(value)
        cut.append(censored)

    def mean_error(self, which: int) -> float | None:
        """Mean absolute log error of one predictor (0 or 1) at this key, None before any."""
        n = self.scored[which]
        return self.scored_err[which] / n if n else None

    def record(self, which: int, bound: bool, need: int) -> tuple[int, float | None]:
        """Predictions scored in slot ``which`` and their mean bound loss (``bound``) or median
        error. A ratio slot, pooled (3, 4) or the signature's own (1, 2), with fewer than
        ``need`` scores is judged on both together, as every ratio was before they were apart
        (``_slots``)."""
        slots: tuple[int, ...] = (which,)
        if which and self.scored[which] < need:
            slots = (1, 3) if which in (1, 3) else (2, 4)
        n = sum(self.scored[i] for i in slots)
        total = sum((self.scored_loss if bound else self.scored_err)[i] for i in slots)
        return n, (total / n if n else None)

    def mean_bound_loss(self, which: int) -> float | None:
        """Mean quantile loss of one predictor's bounds at this key (``_bound_loss``), None
        before any."""
        n = self.scored[which]
        return self.scored_loss[which] / n if n else None


@dataclass(frozen=True, slots=True)
class EstimatorParams:
    """Window, minimum samples and quantile (defaults argued in ``docs/evaluation.md``)."""

    window: int = 64
    min_samples: int = 3
    quantile: float = 0.95
    startup_s: float = 0.0  # start-up prior (module docstring)

    def __post_init__(self) -> None:
        if self.window < 1:
            raise PolicyError("window", f"must be >= 1, got {self.window}")
        if self.min_samples < 1:
            raise PolicyError("min_samples", f"must be >= 1, got {self.min_samples}")
        if not 0.5 <= self.quantile <= 1.0:
            raise PolicyError("quantile", f"must be in [0.5, 1], got {self.quantile}")
        if not (math.isfinite(self.startup_s) and self.startup_s >= 0):
            raise PolicyError("startup_s", f"must be a finite number >= 0, got {self.startup_s}")


# Estimates kept at most (about 200 bytes each), and entries of the index of the keys they read:
# an estimate dropped through one key stays listed under the others until they learn, and is
# listed again when it is estimated again, so the index is bounded on its own.
_MEMO_LIMIT = 100_000
_READERS_LIMIT = 4 * _MEMO_LIMIT

# Learned runs whose overrun (work over its bound) the estimator keeps across all signatures
# (module docstring, "Calibration"): enough that the runs beyond a bound, one in twenty at 0.95
# if the bounds hold as they should, number in the dozens.
OVERRUN_WINDOW = 1024

# What an estimate is memoised by: the job's keys, tasks, deadline and maxCPUs.
_Args = tuple[Keys, int, float | None, int]


def quantile(values: Iterable[float], q: float) -> float:
    """Nearest-rank empirical quantile (the ``ceil(q * n)``-th smallest value)."""
    data = sorted(values)
    if not data:
        raise PolicyError("samples", "no samples")
    rank = max(1, math.ceil(q * len(data) - 1e-9))
    return data[rank - 1]


def censored_quantile(values: Sequence[float], censored: Sequence[bool], q: float) -> float | None:
    """``quantile`` of samples some of which are only lower bounds (``censored``), from the
    product-limit (Kaplan-Meier) distribution: the smallest uncensored sample at which the
    share of runs ended reaches ``q``. A lower bound counts among the runs at risk up to its
    value and then leaves them, its run's share passing to the larger samples. None when the
    runs known to be larger than every ended one are more than ``1 - q`` of them: no sample
    bounds the work with that coverage. Without censored samples it is ``quantile``."""
    pairs = sorted(zip(values, censored, strict=True), key=lambda p: (p[0], p[1]))
    n = len(pairs)
    if n == 0:
        raise PolicyError("samples", "no samples")
    at_risk = n
    alive = 1.0  # the share of runs still running beyond the current value
    i = 0
    while i < n:
        v = pairs[i][0]
        ended = cut = 0
        while i < n and pairs[i][0] == v:
            if pairs[i][1]:
                cut += 1
            else:
                ended += 1
            i += 1
        if ended:
            alive *= 1 - ended / at_risk
            if 1 - alive >= q - 1e-9 / n:
                return v
        at_risk -= ended + cut
    return None


def _both(absolute: _Prediction | None, relative: _Prediction | None) -> bool:
    """Whether both predictors answered from runs (the tighter bound is then a candidate)."""
    return (
        absolute is not None
        and relative is not None
        and absolute.est.samples > 0
        and relative.est.samples > 0
    )


def _slots(relative: _Prediction | None) -> tuple[int, int]:
    """Where a signature scores the ratio predictor and the tighter bound (``_Series.scored``):
    ratios pooled from other jobs bound a job other than its own runs' ratios do, so each is
    judged on its own record."""
    return (3, 4) if relative is not None and relative.pooled else (1, 2)


def _bound_loss(work: float, upper: float, q: float) -> float:
    """The quantile (pinball) loss of a bound ``upper`` at level ``q`` for the work that came,
    in log space: a bound above the work costs ``1 - q`` per log unit, one below it ``q``."""
    d = math.log(work / upper)
    return q * d if d > 0 else (q - 1) * d


@dataclass(slots=True)
class Estimator:
    """Per-key samples of task seconds and deadline ratios (module docstring)."""

    params: EstimatorParams = field(default_factory=EstimatorParams)
    _series: dict[str, _Series] = field(default_factory=dict)
    # Outcomes learned with a start-up: none in the simulator, whose estimates then skip it.
    _overheads: int = 0
    # Each learned run's work over the bound it would have had, the last ``OVERRUN_WINDOW``
    # (module docstring, "Calibration").
    _overruns: deque[float] = field(default_factory=lambda: deque(maxlen=OVERRUN_WINDOW))
    # ``estimate``'s answers, each dropped when a run is learned at a key it read
    # (``_forget``): a round estimates every waiting job again, from mostly the same samples.
    _memo: dict[_Args, Estimate] = field(default_factory=dict)
    # key -> the memo entries that read it (may name entries already dropped), and how many
    # entries all its lists hold
    _readers: dict[str, list[_Args]] = field(default_factory=dict)
    _listed: int = 0

    @property
    def _support(self) -> int:
        """Samples a key needs for its ``quantile`` to be one of them with that coverage: a new
        run exceeds the ``k``-th smallest of ``n`` with probability ``(n + 1 - k) / (n + 1)``,
        so ``q`` needs ``k = ceil(q (n + 1)) <= n``, i.e. ``n >= q / (1 - q)`` (19 at 0.95);
        capped at the window."""
        q = self.params.quantile
        if q >= 1.0:
            return self.params.window
        return min(self.params.window, math.ceil(q / (1 - q) - 1e-9))

    def _get(self, key: str) -> _Series:
        s = self._series.get(key)
        if s is None:
            w = self.params.window
            s = _Series(
                deque(maxlen=w),
                deque(maxlen=w),
                deque(maxlen=w),
                deque(maxlen=w),
                deque(maxlen=w),
                deque(maxlen=w),
            )
            self._series[key] = s
        return s

    def samples(self, key: str) -> int:
        """Runs currently in ``key``'s window."""
        s = self._series.get(key)
        return 0 if s is None else len(s.task_s)

    def _pick(
        self, keys: Keys, ratio: bool, deadline_s: float | None = None
    ) -> tuple[str, _Series] | None:
        # Task seconds only predict a job from its own signature: across different jobs (a
        # user's, a queue's) they spread over orders of magnitude and a low quantile of them
        # would be a bound in name only. Ratios are relative to each job's own deadline, so
        # they carry over along the whole chain (the global ratios are Justice's fractions),
        # and a key answers only with enough of them for the quantile to be one of them
        # (``_support``): the largest of three ratios bounded a fourth only three times
        # in four, and every miss of a job promised at its bound is waste. At the signature the
        # ratios are those of the runs whose deadlines were nearest this job's (``_Series.near``).
        chain = keys.chain() if ratio else (keys.signature,)
        need = self.params.min_samples
        if ratio:
            need = max(need, self._support)
        for key in chain:
            s = self._series.get(key)
            if s is None:
                continue
            data = s.ratio if ratio else s.task_s
            # a deadline already reached has no log, and no runs due near it
            if ratio and deadline_s is not None and deadline_s > 0 and key == keys.signature:
                s = s.near(deadline_s, self._support)
            if (len(data) >= need or (key == GLOBAL and data)) and (
                s.quantile(int(ratio), self.params.quantile) is not None
            ):
                return key, s
        return None

    def _predict(
        self, keys: Keys, tasks: int, deadline_s: float | None, max_cpus: int
    ) -> tuple[_Prediction | None, _Prediction | None, int]:
        """Each predictor's estimate with the samples it took it from (task seconds, ratios),
        and how many keys of the chain it read (from the signature on, for ``_forget``): the
        ratio predictor reads down the chain to the key it takes, or all of it when none has
        enough runs, since any of them may have enough after a learned run."""
        absolute = relative = None
        chain = keys.chain()
        read = 1  # the signature: its task seconds and which predictor it trusts
        picked = self._pick(keys, ratio=False)
        if picked is not None:
            key, series = picked
            absolute = self._scaled(series, 0, float(tasks), f"task_s@{key}")
        if deadline_s is not None:
            picked = self._pick(keys, ratio=True, deadline_s=deadline_s)
            scale = deadline_s * max_cpus
            if picked is not None:
                key, series = picked
                relative = self._scaled(series, 1, scale, f"ratio@{key}")
                relative = relative._replace(pooled=key != keys.signature)
                read = chain.index(key) + 1
            else:
                read = len(chain)
                if absolute is None:
                    window = deadline_s - self.overhead(keys)
                    scale = (window if window > 0 else deadline_s) * max_cpus
                    relative = _Prediction(Estimate(scale, scale, "bootstrap", 0), (1.0,), scale)
        return absolute, relative, read

    def _scaled(self, series: _Series, which: int, scale: float, source: str) -> _Prediction:
        """The bound (``quantile``) and central value of ``scale`` x the samples of one window
        (0: task seconds, 1: ratios)."""
        data = series.values(which)
        upper = series.quantile(which, self.params.quantile)
        central = series.quantile(which, 0.5)
        assert upper is not None and central is not None  # ``_pick`` took a bounded window
        return _Prediction(
            Estimate(scale * upper, scale * central, source, len(data)), data, scale, series, which
        )

    def overhead(self, keys: Keys) -> float:
        """Start-up bound: the quantile of the most specific key's start-up samples (``min_samples``
        of them, or any at the global key), and no less than the prior ``startup_s`` while the
        estimator has seen fewer start-ups than its quantile needs (module docstring)."""
        return self._overhead_reading(keys)[0]

    def _overhead_reading(self, keys: Keys) -> tuple[float, int]:
        """``overhead``, and how many keys of the chain it read (``_predict``)."""
        if not self._overheads:
            return self.params.startup_s, 0  # the simulator's every estimate: nothing to look up
        learned = 0.0
        chain = keys.chain()
        read = len(chain)
        for i, key in enumerate(chain):
            s = self._series.get(key)
            if s is not None and (
                len(s.overhead) >= self.params.min_samples or (key == GLOBAL and s.overhead)
            ):
                learned = s.quantile(2, self.params.quantile) or 0.0
                read = i + 1
                break
        if self._overheads < self._support:
            return max(learned, self.params.startup_s), read
        return learned, read

    def estimate(self, keys: Keys, tasks: int, deadline_s: float | None, max_cpus: int) -> Estimate:
        """Work bound (and start-up bound) for a job; see ``_combine``. Kept until a run
        is learned at one of the keys it read (``_forget``): every round estimates each waiting
        job again, and most learned runs change none of its samples."""
        args = (keys, tasks, deadline_s, max_cpus)
        est = self._memo.get(args)
        if est is None:
            absolute, relative, read = self._predict(keys, tasks, deadline_s, max_cpus)
            est = self._combine(keys, absolute, relative)
            overhead, read_overhead = self._overhead_reading(keys)
            if overhead:
                est = replace(est, overhead_s=overhead)
            read = max(read, read_overhead)
            if len(self._memo) >= _MEMO_LIMIT or self._listed >= _READERS_LIMIT:
                self._clear_memo()  # long without learning at the keys read: start again
            self._memo[args] = est
            for key in keys.chain()[:read]:
                self._readers.setdefault(key, []).append(args)
            self._listed += read
        return est

    def _clear_memo(self) -> None:
        self._memo.clear()
        self._readers.clear()
        self._listed = 0

    def _forget(self, outcome: Outcome) -> None:
        """Drop the kept estimates that read a key ``outcome`` is learned at. A start-up also
        counts towards the prior's support (``overhead``), which every estimate reads, so until
        the estimator has seen enough of them one drops every estimate."""
        if outcome.overhead_s is not None and self._overheads <= self._support:
            self._clear_memo()
            return
        for key in outcome.keys.chain():
            readers = self._readers.pop(key, ())
            self._listed -= len(readers)
            for args in readers:
                self._memo.pop(args, None)

    def _combine(
        self, keys: Keys, absolute: _Prediction | None, relative: _Prediction | None
    ) -> Estimate:
        """Work bound and central value for a job from its two predictions.

        With both predictors available, the signature's own record decides each: the bound
        comes from the predictor whose bounds had the smaller mean quantile loss so far
        (``_bound_loss``), the central value from the one whose medians had the smaller mean
        absolute log error, once each has ``min_samples`` scored predictions; until then both
        come from the ratio (Justice's predictor, and the thesis' assumption that a deadline is
        achievable with full parallelism on an empty cluster). A central value above the bound
        is the bound.
        """
        est = self._choose(keys, absolute, relative).est
        central = self._choose(keys, absolute, relative, bound=False).est
        if central is not est:
            est = replace(est, point=min(central.point, est.upper))
        return est

    def works(
        self,
        keys: Keys,
        tasks: int,
        deadline_s: float | None,
        max_cpus: int,
        cautious: bool = False,
    ) -> list[float]:
        """The job's work as each sample of the bounding predictor (the window ``estimate`` takes
        its quantiles from) predicts it, ascending: the estimate's whole distribution.

        ``cautious``: where the bound is the tighter of both predictors' (``_tighter``), the
        larger of their two predictions at each rank instead, so the share of the list below a
        work is the smaller of the shares the two predictors give. A try is a bet on a job its
        bound rules out, and its odds are not taken from the more hopeful predictor alone."""
        best = self._bounding(keys, tasks, deadline_s, max_cpus)
        own = sorted(v * best.scale for v in best.data)
        if not cautious or best.other is None:
            return own
        other = sorted(v * best.other.scale for v in best.other.data)
        m = max(len(own), len(other))
        return [
            max(own[math.ceil(i * len(own) / m) - 1], other[math.ceil(i * len(other) / m) - 1])
            for i in range(1, m + 1)
        ]

    def _bounding(
        self, keys: Keys, tasks: int, deadline_s: float | None, max_cpus: int
    ) -> _Prediction:
        """The prediction that bounds a job (``_combine``)."""
        absolute, relative, _ = self._predict(keys, tasks, deadline_s, max_cpus)
        return self._choose(keys, absolute, relative)

    def _choose(
        self,
        keys: Keys,
        absolute: _Prediction | None,
        relative: _Prediction | None,
        bound: bool = True,
    ) -> _Prediction:
        """The prediction whose bounds (``bound``) or medians scored better (``_combine``)."""
        if absolute is None or relative is None:
            best = absolute or relative
            if best is None:
                raise PolicyError(
                    "deadline_s", "no history and no deadline: nothing to estimate from"
                )
            return best
        s = self._series.get(keys.signature)
        need = self.params.min_samples
        if s is None:
            return relative
        ratio, tighter = _slots(relative)
        na, la = s.record(0, bound, need)
        nr, lr = s.record(ratio, bound, need)
        if na >= need and nr >= need:
            assert la is not None and lr is not None
            best = absolute if la < lr else relative
            if bound and _both(absolute, relative):
                nt, lt = s.record(tighter, True, need)
                if nt >= need and lt is not None and lt < min(la, lr):
                    tight = self._tighter(absolute, relative)
                    if math.isfinite(tight.est.upper):
                        return tight
            return best
        return relative

    def _tighter(self, absolute: _Prediction, relative: _Prediction) -> _Prediction:
        """The smaller of the two bounds for this job, each taken at ``1 - (1 - q) / 2``: the
        work exceeds neither with probability at least ``q`` where each bound has its own
        coverage (Bonferroni; module docstring). The other prediction rides along for the
        chances of a try (``works``)."""
        level = 1 - (1 - self.params.quantile) / 2
        at_level = []
        for pred in (absolute, relative):
            assert pred.series is not None
            value = pred.series.quantile(pred.which, level)
            # killed runs may leave the higher level unknown: that bound is then no bound
            upper = math.inf if value is None else pred.scale * value
            at_level.append(pred._replace(est=replace(pred.est, upper=upper)))
        a, r = at_level
        return a._replace(other=r) if a.est.upper <= r.est.upper else r._replace(other=a)

    def learn(self, outcome: Outcome) -> Estimator:
        """Add one completed run to every key of its chain; returns ``self``."""
        s = self._get(outcome.keys.signature)
        point = None
        absolute, relative, _ = self._predict(
            outcome.keys, outcome.tasks, outcome.deadline_s, outcome.max_cpus
        )
        preds = (absolute, relative)
        # a killed run's work is only a lower bound: it scores no prediction
        if not outcome.censored and (preds[0] is not None or outcome.deadline_s is not None):
            # the estimate it would have had: its bound and samples are the bounding
            # predictor's (``_combine`` only sets the central value)
            had = self._combine(outcome.keys, *preds)
            point = had.point
            rel_slot, tight_slot = _slots(relative)
            for which, pred in ((0, absolute), (rel_slot, relative)):
                if pred is not None and pred.est.samples > 0 and pred.est.point > 0:
                    s.scored[which] += 1
                    s.scored_err[which] += abs(math.log(outcome.work / pred.est.point))
                    s.scored_loss[which] += _bound_loss(
                        outcome.work, pred.est.upper, self.params.quantile
                    )
            if _both(absolute, relative):
                assert absolute is not None and relative is not None
                tight = self._tighter(absolute, relative).est.upper
                if math.isfinite(tight):
                    s.scored[tight_slot] += 1
                    s.scored_loss[tight_slot] += _bound_loss(
                        outcome.work, tight, self.params.quantile
                    )
            if had.samples > 0 and had.upper > 0:
                self._overruns.append(outcome.work / had.upper)
        if point is not None and point > 0:
            err = abs(math.log(outcome.work / point))
            s.errors += 1
            s.abs_log_err += err
            s.off_2x += 1 if err >= math.log(2.0) else 0
        task_s = outcome.work / outcome.tasks
        ratio = (
            outcome.work / (outcome.deadline_s * outcome.max_cpus)
            if outcome.deadline_s is not None and outcome.deadline_s > 0
            else None
        )
        if outcome.overhead_s is not None:
            self._overheads += 1
        self._forget(outcome)
        for key in dict.fromkeys(outcome.keys.chain()):
            series = self._get(key)
            series.memo.clear()
            series.runs += 1
            series.append(0, task_s, outcome.censored)
            if ratio is not None and outcome.deadline_s is not None:
                series.append(1, ratio, outcome.censored)
                series.ratio_log_dl.append(math.log(outcome.deadline_s))
            if outcome.overhead_s is not None:
                series.overhead.append(outcome.overhead_s)
        return self

    def error(self, key: str) -> dict[str, float | int | None]:
        """Prediction error so far for the runs of ``key`` (a signature)."""
        s = self._series.get(key)
        if s is None or s.errors == 0:
            return {"predictions": 0, "off_by_2x": None, "mean_abs_log_error": None}
        return {
            "predictions": s.errors,
            "off_by_2x": s.off_2x / s.errors,
            "mean_abs_log_error": s.abs_log_err / s.errors,
        }

    def entries(self) -> dict[str, dict[str, Any]]:
        """Read-only view per key: sample counts, quantiles and errors (for ``GET /estimator``)."""
        q = self.params.quantile
        out: dict[str, dict[str, Any]] = {}
        for key in sorted(self._series):
            s = self._series[key]
            out[key] = {
                "runs": s.runs,
                "samples": len(s.task_s),
                # of them, runs killed before they ended (their work a lower bound); a quantile
                # they leave unknown is None
                "killed": sum(s.task_cut),
                "task_s_median": s.quantile(0, 0.5) if s.task_s else None,
                "task_s_upper": s.quantile(0, q) if s.task_s else None,
                "ratio_median": s.quantile(1, 0.5) if s.ratio else None,
                "ratio_upper": s.quantile(1, q) if s.ratio else None,
                "task_s_error": s.mean_error(0),
                "ratio_error": s.mean_error(1),
                # what picks the predictor that bounds (``_combine``)
                "task_s_bound_loss": s.mean_bound_loss(0),
                "ratio_bound_loss": s.mean_bound_loss(1),
                "tighter_bound_loss": s.mean_bound_loss(2),
                # the same where the ratios were pooled from the keys below the signature
                # (before it had enough runs of its own, or with its own left unknown)
                "pooled_ratio_error": s.mean_error(3),
                "pooled_ratio_bound_loss": s.mean_bound_loss(3),
                "pooled_tighter_bound_loss": s.mean_bound_loss(4),
                "overhead_s_upper": quantile(s.overhead, q) if s.overhead else None,
                **self.error(key),
            }
        return out

    def startup(self) -> dict[str, float | int | bool]:
        """The start-up prior and whether it still holds: start-ups seen against those the
        quantile needs (for ``GET /estimator``)."""
        return {
            "prior_s": self.params.startup_s,
            "seen": self._overheads,
            "needed": self._support,
            "prior_holds": self._overheads < self._support and self.params.startup_s > 0,
        }

    def totals(self) -> dict[str, float | int | None]:
        """Errors over all signatures together, and how often the kept runs exceeded the bound
        they would have had (``bounds_checked`` runs, ``above_bound`` the share; module
        docstring, "Calibration")."""
        kept = len(self._overruns)
        calibration = {
            "bounds_checked": kept,
            "above_bound": sum(1 for r in self._overruns if r > 1.0) / kept if kept else None,
        }
        n = sum(s.errors for s in self._series.values())
        if n == 0:
            return {"predictions": 0, "off_by_2x": None, "mean_abs_log_error": None, **calibration}
        return {
            "predictions": n,
            "off_by_2x": sum(s.off_2x for s in self._series.values()) / n,
            "mean_abs_log_error": sum(s.abs_log_err for s in self._series.values()) / n,
            **calibration,
        }


def rebuild(outcomes: Iterable[Outcome], params: EstimatorParams | None = None) -> Estimator:
    """An estimator that has learned ``outcomes`` in order (start-up rebuild from history)."""
    est = Estimator(params or EstimatorParams())
    for o in outcomes:
        est.learn(o)
    return est


def params_from(values: Mapping[str, Any]) -> EstimatorParams:
    """``EstimatorParams`` from the policy's validated parameter mapping."""
    return EstimatorParams(
        window=int(values.get("window", 64)),
        min_samples=int(values.get("min_samples", 3)),
        quantile=float(values.get("quantile", 0.95)),
        startup_s=float(values.get("startup_s", 0.0)),
    )
