"""Evaluation metrics of the three papers, as pure functions.

* SDR, PTR, WTR, Jain's fairness on fraction of demand, equality and utilization: Justice thesis
  (seed 004) sections 4.2, 5.4.1 to 5.4.4.
* Mean job slowdown per queue and the global discrimination factor: Fawkes (seed 000) sections 4.1
  (eqs. 1 to 3) and 7.3.
* Sharing benefit/loss degree relative to static partitioning: LTRF (seed 002) section 9.4.4,
  Figure 9.1.

Choices where the papers are loose (also in ``docs/evaluation.md``):

* WTR. Read literally (``sum of T_i over failed or dropped jobs / sum over all jobs`` with ``T_i``
  the job's computation time) WTR would always be ``1 - PTR``, yet the thesis says PYTHIA keeps
  wasted work near 0 while its PTR is below 1. So WTR counts the vcore-seconds that unsuccessful
  jobs actually *consumed* (a job dropped before running wastes nothing), over the total
  computation time of all jobs; PTR counts the full ``compTime`` of jobs that met their deadline.
* Jain's indexes are computed on snapshots every 60 s over all jobs in the system (running and
  waiting; a waiting job has ``A_i = 0``) and averaged over the snapshots that had any job.
* Slowdown is ``(end - submit) / ideal_runtime`` with the ideal runtime on the empty simulated
  cluster (Fawkes uses a reference static cluster; we have no such reference in a trace).
* Sharing degree of a queue at time ``t``: ``U_shared(t) / U_static(t) - 1`` with ``U`` its
  cumulative vcore-seconds received, ``U_static`` from the same jobs run alone on a static
  partition of ``share x capacity``. Positive is benefit, negative is loss, 0 is static.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.sim.jobs import JobRun, Status

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def jain(values: Sequence[float]) -> float | None:
    """Jain's index ``(sum x)^2 / (n * sum x^2)``; None when it is undefined (all zero, empty)."""
    n = len(values)
    sq = sum(v * v for v in values)
    if n == 0 or sq <= 0:
        return None
    s = sum(values)
    return s * s / (n * sq)


def fraction_of_demand_index(allocs: Sequence[float], demands: Sequence[float]) -> float | None:
    """Jain's index on ``F_i = A_i / D_i``, with ``F_i = 1`` when ``A_i >= D_i`` (section 5.4.1)."""
    fractions = [min(1.0, a / d) for a, d in zip(allocs, demands, strict=True)]
    return jain(fractions)


def equality_index(allocs: Sequence[float], demands: Sequence[float]) -> float | None:
    """Jain's index on allocations within classes of equal maximum demand, averaged weighted by
    class size (section 5.4.1, "Equality does not mean Justice"). Classes where every job has
    nothing are left out because the index is undefined for them.
    """
    classes: dict[float, list[float]] = defaultdict(list)
    for a, d in zip(allocs, demands, strict=True):
        classes[d].append(a)
    total, weight = 0.0, 0
    for members in classes.values():
        idx = jain(members)
        if idx is not None:
            total += idx * len(members)
            weight += len(members)
    return total / weight if weight else None


class AllocationTally:
    """Running sums for the Jain snapshots over jobs whose allocation only changes at discrete
    moments (fixed grants, and waiting jobs at 0), so that a 60 s snapshot does not visit every
    such job: ``n``, ``sum F``, ``sum F^2`` and per demand class ``[count, sum A, sum A^2]``.
    """

    def __init__(self) -> None:
        self.n = 0
        self.sum_f = 0.0
        self.sum_f2 = 0.0
        self.classes: dict[float, list[float]] = {}

    def add(self, alloc: float, demand: float, sign: int = 1) -> None:
        """Count a job holding ``alloc`` of its ``demand`` (``sign=-1`` removes it again)."""
        f = min(1.0, alloc / demand)
        self.n += sign
        self.sum_f += sign * f
        self.sum_f2 += sign * f * f
        cls = self.classes.setdefault(demand, [0.0, 0.0, 0.0])
        cls[0] += sign
        cls[1] += sign * alloc
        cls[2] += sign * alloc * alloc
        if cls[0] <= 0:
            del self.classes[demand]
        if self.n == 0:
            self.sum_f = self.sum_f2 = 0.0  # drop accumulated float noise

    def remove(self, alloc: float, demand: float) -> None:
        """Undo ``add(alloc, demand)``."""
        self.add(alloc, demand, -1)


def snapshot_indexes(
    allocs: FloatArray, demands: FloatArray, tally: AllocationTally
) -> tuple[float | None, float | None]:
    """Jain on fraction of demand and equality over the jobs in ``allocs``/``demands`` plus those
    counted in ``tally`` (same definitions as ``fraction_of_demand_index`` and ``equality_index``).
    """
    f = np.minimum(1.0, allocs / demands) if allocs.size else allocs
    n = allocs.size + tally.n
    # ufunc reductions and array methods called directly: numpy's Python wrappers around them
    # cost as much as the arithmetic on a few thousand jobs
    s, s2 = float(np.add.reduce(f)) + tally.sum_f, float(np.dot(f, f)) + tally.sum_f2
    fairness = s * s / (n * s2) if n and s2 > 1e-12 else None
    if not allocs.size:
        return fairness, _equality(tally.classes)
    uniq, counts, sums, sqs = _classes(allocs, demands)
    if not tally.classes:
        # Only the jobs in the arrays (every fair-share run): the classes in ascending demand,
        # summed as the loop of ``_equality`` would, left to right (``cumsum`` adds in order).
        keep = sqs > 1e-12
        if not keep.any():
            return fairness, None
        kept_sums, kept_sqs = sums[keep], sqs[keep]
        total = float((kept_sums * kept_sums / kept_sqs).cumsum()[-1])
        return fairness, total / float(counts[keep].sum())
    classes = {d: list(v) for d, v in tally.classes.items()}
    for d, count, sa, sa2 in zip(
        uniq.tolist(), counts.tolist(), sums.tolist(), sqs.tolist(), strict=True
    ):
        c = classes.setdefault(d, [0.0, 0.0, 0.0])
        c[0] += count
        c[1] += sa
        c[2] += sa2
    return fairness, _equality(classes)


def _classes(
    allocs: FloatArray, demands: FloatArray
) -> tuple[FloatArray, IntArray, FloatArray, FloatArray]:
    """The distinct demands in ascending order, and per demand the jobs, the sum of their
    allocations and of their squares, each summed in array order."""
    low, high = float(np.minimum.reduce(demands)), float(np.maximum.reduce(demands))
    whole = demands.astype(np.int64) if low >= 0 and high <= 4 * demands.size + 1024 else None
    if whole is not None and bool((whole == demands).all()):
        # whole vcores (the simulator's caps): counted by value, without sorting
        held = np.bincount(whole)
        present = held.nonzero()[0]
        uniq = present.astype(np.float64)
        counts = np.asarray(held[present], np.int64)
        sums = np.asarray(np.bincount(whole, weights=allocs)[present], np.float64)
        sqs = np.asarray(np.bincount(whole, weights=allocs * allocs)[present], np.float64)
        return uniq, counts, sums, sqs
    found, inv, found_counts = np.unique(demands, return_inverse=True, return_counts=True)
    return (
        found,
        np.asarray(found_counts, np.int64),
        np.asarray(np.bincount(inv, weights=allocs), np.float64),
        np.asarray(np.bincount(inv, weights=allocs * allocs), np.float64),
    )


def _equality(classes: dict[float, list[float]]) -> float | None:
    total = weight = 0.0
    for count, sa, sa2 in classes.values():
        if count > 0 and sa2 > 1e-12:
            total += sa * sa / sa2  # Jain x count = sa^2 / (count * sa2) x count
            weight += count
    return total / weight if weight else None


@dataclass(frozen=True, slots=True)
class Outcomes:
    """Deadline and productivity ratios over one run (section 5.4.2 and 5.4.3)."""

    jobs: int
    succeeded: int
    missed: int
    killed: int
    dropped: int
    sdr: float
    ptr: float
    wtr: float


def outcomes(runs: Iterable[JobRun]) -> Outcomes:
    """SDR = successes / submitted; PTR and WTR as in the module docstring."""
    counts = {s: 0 for s in Status}
    total_work = productive = wasted = 0.0
    n = 0
    for run in runs:
        n += 1
        counts[run.status] += 1
        total_work += run.job.work
        if run.status is Status.SUCCEEDED:
            productive += run.job.work
        else:
            wasted += run.consumed
    if n == 0:
        return Outcomes(0, 0, 0, 0, 0, 0.0, 0.0, 0.0)
    return Outcomes(
        jobs=n,
        succeeded=counts[Status.SUCCEEDED],
        missed=counts[Status.MISSED],
        killed=counts[Status.KILLED],
        dropped=counts[Status.DROPPED],
        sdr=counts[Status.SUCCEEDED] / n,
        ptr=productive / total_work,
        wtr=wasted / total_work,
    )


def utilization(busy_vcore_s: float, capacity: int, start: float, end: float) -> float:
    """``busy / (busy + idle)`` over ``[start, end]`` (section 5.4.4)."""
    span = end - start
    if span <= 0 or capacity <= 0:
        return 0.0
    return busy_vcore_s / (capacity * span)


def slowdown(run: JobRun, capacity: int) -> float | None:
    """Response time over ideal runtime for jobs that completed; None otherwise."""
    if run.end_s is None or run.status not in (Status.SUCCEEDED, Status.MISSED):
        return None
    return (run.end_s - run.job.submit_s) / run.job.ideal_runtime(capacity)


def mean_slowdown_by_queue(runs: Iterable[JobRun], capacity: int) -> dict[str, float]:
    """Fawkes' per-cluster average job slowdown (section 7.3, Figure 9), one value per queue."""
    acc: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        s = slowdown(run, capacity)
        if s is not None:
            acc[run.job.queue].append(s)
    return {q: sum(v) / len(v) for q, v in sorted(acc.items())}


def discrimination_step(
    previous: Mapping[str, float],
    used_fraction: Mapping[str, float],
    weights: Mapping[str, float],
    dt: float,
) -> tuple[dict[str, float], float]:
    """One rectangle-rule step of eq. (2) and the global factor of eq. (3).

    ``D_i += (c_i - w_i) * dt`` for every queue in ``weights`` (the active ones; others restart
    from zero when they come back), factor ``= mean(D_i^2)``.
    """
    d = {q: previous.get(q, 0.0) + (used_fraction.get(q, 0.0) - w) * dt for q, w in weights.items()}
    factor = sum(v * v for v in d.values()) / len(d) if d else 0.0
    return d, factor


def sharing_degree(shared_cum: float, static_cum: float) -> float | None:
    """``U_shared / U_static - 1``; None while the static partition has received nothing."""
    if static_cum <= 0:
        return None
    return shared_cum / static_cum - 1.0


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the defined values, None if there are none."""
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None
