"""Synthetic deadlines of the Justice evaluation (thesis seed 004, section 5.2.1; section 4.2).

Every deadline is ``D_i = x * T_i`` with ``T_i`` the job's optimal runtime and ``x`` drawn per job:

| type | ``x`` |
| --- | --- |
| ``Fixed1x`` / ``Fixed2x`` | 1 / 2 |
| ``Jockey1x2x`` / ``Jockey2x4x`` | 1 or 2 / 2 or 4, each with probability 1/2 (Jockey) |
| ``90loose`` | 2 with probability 0.9, else 1 (Jockey1x2x biased to the loose value) |
| ``Aria1x3x`` / ``Aria2x4x`` | uniform on [1, 3] / [2, 4] (Aria) |

``T_i`` ("the optimal execution time of a job, which we extract from our workload trace") is, by
default, ``compTime / min(requestedTasks, capacity)``: the runtime with the job's full
parallelism on the empty simulated cluster. That keeps the thesis' one assumption about deadlines,
"an optimal allocation in an empty cluster is sufficient to complete the job before its deadline",
true in our perfectly parallel model. ``basis="trace"`` uses the runtime recorded in the trace
instead (where there is one), which can be shorter than the model allows.

Both tie each deadline to its own job's run, so a job's ``work / (deadline x maxCPUs)`` is
``1 / x`` whatever the job: a predictor that pools those ratios across jobs learns each job's
true work from its deadline, which a user's deadline does not carry. ``basis="template"`` takes
``T_i`` from what a user of a recurring job can know, the median ideal runtime of the trace's
jobs with the same name (its template); a run slower than its template's median may then get a
deadline it cannot meet even alone on the cluster, as a real run may. Jobs without a name keep
their own ``T_i``.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Iterable, Sequence

from app.sim.jobs import SimJob

Multiplier = Callable[[random.Random], float]


def _choice(low: float, high: float, p_high: float) -> Multiplier:
    return lambda rng: high if rng.random() < p_high else low


def _uniform(low: float, high: float) -> Multiplier:
    return lambda rng: rng.uniform(low, high)


def _fixed(x: float) -> Multiplier:
    return lambda rng: x


DEADLINE_TYPES: dict[str, Multiplier] = {
    "Fixed1x": _fixed(1.0),
    "Fixed2x": _fixed(2.0),
    "Jockey1x2x": _choice(1.0, 2.0, 0.5),
    "Jockey2x4x": _choice(2.0, 4.0, 0.5),
    "90loose": _choice(1.0, 2.0, 0.9),
    "Aria1x3x": _uniform(1.0, 3.0),
    "Aria2x4x": _uniform(2.0, 4.0),
}

BASES = ("ideal", "trace", "template")


def optimal_runtime(job: SimJob, capacity: int, basis: str = "ideal") -> float:
    """``T_i`` of the module docstring."""
    if basis == "trace" and job.runtime_s is not None and job.runtime_s > 0:
        return job.runtime_s
    if basis == "template":
        # a template's median is a property of the whole trace, not of one job
        raise ValueError("basis 'template' needs the whole trace: use template_runtimes")
    if basis not in BASES:
        raise ValueError(f"unknown deadline basis {basis!r}; use one of {', '.join(BASES)}")
    return job.ideal_runtime(capacity)


def template_runtimes(jobs: Sequence[SimJob], capacity: int) -> list[float]:
    """``T_i`` of ``basis="template"`` for each of ``jobs`` (module docstring)."""
    by_name: dict[str, list[float]] = {}
    for j in jobs:
        if j.name:
            by_name.setdefault(j.name, []).append(j.ideal_runtime(capacity))
    typical = {name: statistics.median(runtimes) for name, runtimes in by_name.items()}
    return [typical[j.name] if j.name else j.ideal_runtime(capacity) for j in jobs]


def assign_deadlines(
    jobs: Iterable[SimJob], kind: str, capacity: int, seed: int, basis: str = "ideal"
) -> list[SimJob]:
    """Copies of ``jobs`` with ``deadline_s = x * T_i``; one draw per job, in input order."""
    jobs = list(jobs)
    try:
        draw = DEADLINE_TYPES[kind]
    except KeyError:
        raise ValueError(
            f"unknown deadline type {kind!r}; use one of {', '.join(DEADLINE_TYPES)}"
        ) from None
    if basis == "template":
        runtimes = template_runtimes(jobs, capacity)
    else:
        runtimes = [optimal_runtime(j, capacity, basis) for j in jobs]
    rng = random.Random(seed)
    return [j.with_deadline(draw(rng) * t) for j, t in zip(jobs, runtimes, strict=True)]
