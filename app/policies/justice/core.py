"""Justice and PYTHIA deadline-aware admission (seed 004; ``docs/policies.md`` "PYTHIA and
Justice").

Pure state machines shared by the live sidecar and the simulator:

- ``track_job``: Justice TRACK_JOB, Algorithm 3 (chapter 5), ``maxCPUs = min(requestedTasks,
  capacity)``. PYTHIA's TRACK_JOB (Algorithm 2, chapter 4) is the ``max_frac`` it maintains.
- ``allocation_fraction``: Algorithm 4 then Algorithm 5 (correction by the smoothed error,
  validation to ``[MinCPUFrac, 1]``) for Justice; PYTHIA uses the global ``CPUFrac =
  max(minReqRate)`` with no correction (``docs/policies.md``).
- ``estimate_req``: ESTIMATE_REQ of Algorithms 1 and 6 with the queue-time inflation
  ``deadline / (deadline - queued)``; fewer than 2 completions -> ``maxCpus``.
- ``admit``: ADMISSION_CONTROL + CREATE_OFFERS (Algorithm 6) and the selective kill rule of 5.1.2.
- Baselines of 5.2 that are pure decision rules: ``fair_share`` (Baseline / Reactive FS shares),
  ``reactive_kills`` and ``oracle_admit`` (exact-need admission).

Decisions where the thesis and ``docs/policies.md`` are silent or ambiguous:

- Algorithm 5 line 8-11 clamps low first and high second; when ``MinCPUFrac > 1`` (a job whose
  ``compTime / deadline`` exceeded its tasks) the bound 1 wins, otherwise every later job would be
  infeasible and no completion could ever correct the estimator. PYTHIA's ``CPUFrac`` is capped at 1
  the same way (chapter 4: "CPUFrac is always less than or equal to 1").
- ``ceil`` in ESTIMATE_REQ is taken with a 1e-9 tolerance so that ``0.3 * 10`` asks for 3 CPUs,
  not 4.
- Bootstrap (fewer than 2 completions): chapter 5.1.1 gives a job "the number of CPUs available"
  when ``requestedTasks`` do not fit; ``docs/policies.md`` says an offer is made only if the whole
  request fits, so bootstrap jobs wait for their whole ``maxCpus``. A job whose deadline has passed
  while it waited is dropped in bootstrap too.
- CREATE_OFFERS' ``while`` loop is one pass over the heap in priority order that skips a request
  that does not fit and keeps offering to later (smaller) ones; a second pass could offer nothing
  new. Ties in priority go to the earlier submission, then the job id.
- Kills happen before offers in the same call and their CPUs are offered at once. A kill's
  ``cpus`` is the number of CPUs it frees. "Past its deadline" means ``now - submitted >
  deadline``; a waiting job with ``deadline - (now - submitted) <= 0`` has no time left and is
  dropped.
- The estimator keeps the error sum and the EWMA incrementally (O(1) per completion, so a trace of
  10^5 jobs is linear) plus the last ``error_history`` errors for audit; ``mean`` is
  ``sum / count`` over all errors and ``ewma`` is ``e_1 = err_1``, ``e_n = alpha * err_n + (1 -
  alpha) * e_{n-1}`` (recent errors "trusted" more, 5.1.1).
- PYTHIA shares the kill rule and parameters; it ignores ``smoothing`` and ``alpha``.
- Oracle (5.2): its request is ``max(ceil(compTime / TTD), 1)`` with the job's true ``compTime``;
  feasibility, priority and whole offers are Justice's. Baseline FS shares are integer max-min
  shares of the CPUs among running jobs; Reactive FS adds a kill of every job past its deadline.
  Running a fair-share allocator over time (re-sharing on every arrival) is the simulator's job.
- ``Decision`` is an immutable ``NamedTuple`` rather than a frozen dataclass: ``admit`` builds one
  per waiting job and tuples are cheaper (10,000 jobs per call).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from app.policies.base import ParamSpec, PolicyError, PolicySpec, decision_dict

VARIANTS: tuple[str, str] = ("justice", "pythia")
SMOOTHINGS: tuple[str, str] = ("mean", "ewma")
_CEIL_TOLERANCE = 1e-9


# ---------------------------------------------------------------- inputs


def _require(ok: bool, field: str, message: str) -> None:
    if not ok:
        raise PolicyError(field, message)


def _finite(value: float) -> bool:
    kind = type(value)
    if kind is float or kind is int:  # the common case, without the isinstance checks
        return math.isfinite(value)
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check_capacity(capacity: int) -> None:
    _require(
        isinstance(capacity, int) and not isinstance(capacity, bool) and capacity >= 1,
        "capacity",
        f"must be a whole number >= 1, got {capacity!r}",
    )


@dataclass(frozen=True, slots=True)
class Job:
    """A job waiting for admission: declared tasks, deadline (seconds from submission)."""

    id: str
    tasks: int
    deadline_s: float
    submitted_s: float

    def __post_init__(self) -> None:
        # Messages are built only on failure: a round builds one Job per waiting job.
        if self.tasks < 1:
            raise PolicyError(f"jobs.{self.id}.tasks", f"must be >= 1, got {self.tasks}")
        if not (_finite(self.deadline_s) and self.deadline_s > 0):
            raise PolicyError(
                f"jobs.{self.id}.deadline_s", f"must be a finite number > 0, got {self.deadline_s}"
            )
        if not _finite(self.submitted_s):
            raise PolicyError(f"jobs.{self.id}.submitted_s", "must be finite")


@dataclass(frozen=True, slots=True)
class RunningJob:
    """An admitted job and the CPUs it was granted (its allocation never changes, 5.1.2)."""

    id: str
    tasks: int
    deadline_s: float
    submitted_s: float
    cpus: int


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What TRACK_JOB learns from a completed job (Algorithm 3's arguments)."""

    id: str
    tasks: int
    deadline_s: float
    comp_time: float
    cpus: int
    success: bool

    def __post_init__(self) -> None:
        where = f"outcome.{self.id}"
        _require(self.tasks >= 1, f"{where}.tasks", f"must be >= 1, got {self.tasks}")
        _require(
            _finite(self.deadline_s) and self.deadline_s > 0,
            f"{where}.deadline_s",
            f"must be a finite number > 0, got {self.deadline_s}",
        )
        _require(
            _finite(self.comp_time) and self.comp_time >= 0,
            f"{where}.comp_time",
            f"must be a finite number >= 0, got {self.comp_time}",
        )
        _require(self.cpus >= 0, f"{where}.cpus", f"must be >= 0, got {self.cpus}")


@dataclass(frozen=True, slots=True)
class JusticeParams:
    """Validated parameters; build with ``make_params`` from a plain mapping."""

    variant: str = "justice"
    smoothing: str = "mean"
    alpha: float = 0.5
    drop_threshold: int = 1000
    error_history: int = 100

    def __post_init__(self) -> None:
        _require(
            self.variant in VARIANTS, "policy", f"must be one of {VARIANTS}, got {self.variant!r}"
        )
        spec = _spec(self.variant)
        spec.validate(
            {
                "smoothing": self.smoothing,
                "alpha": self.alpha,
                "drop_threshold": self.drop_threshold,
                "error_history": self.error_history,
            }
        )


class Decision(NamedTuple):
    """One audited decision: the action and the numbers that produced it.

    An immutable named tuple rather than a frozen dataclass: ``admit`` builds one per waiting job
    and tuples are several times cheaper to create (10,000 jobs per call, ``bench_rrf_justice``).
    """

    action: str  # "admit" | "queue" | "drop" | "kill"
    job_id: str
    cpus: int
    reason: str
    fraction: float | None = None
    req_cpus: int | None = None
    ttd_s: float | None = None
    priority: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the playground's decision object plus the audit numbers)."""
        return decision_dict(self)


# ---------------------------------------------------------------- estimator state


@dataclass(frozen=True, slots=True)
class EstimatorState:
    """Algorithm 3's globals; ``max_frac`` is also PYTHIA's ``CPUFrac`` (None = the paper's -1)."""

    completed: int = 0
    min_frac: float | None = None
    max_frac: float | None = None
    last_frac: float | None = None
    last_success: bool = True
    error_sum: float = 0.0
    error_ewma: float | None = None
    errors: tuple[float, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {
            "completed": self.completed,
            "min_frac": self.min_frac,
            "max_frac": self.max_frac,
            "last_frac": self.last_frac,
            "last_success": self.last_success,
            "error_sum": self.error_sum,
            "error_ewma": self.error_ewma,
            "errors": list(self.errors),
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> EstimatorState:
        """Inverse of ``to_dict``; missing keys take the empty-state values."""
        return EstimatorState(
            completed=int(data.get("completed", 0)),
            min_frac=_opt_float(data.get("min_frac")),
            max_frac=_opt_float(data.get("max_frac")),
            last_frac=_opt_float(data.get("last_frac")),
            last_success=bool(data.get("last_success", True)),
            error_sum=float(data.get("error_sum", 0.0)),
            error_ewma=_opt_float(data.get("error_ewma")),
            errors=tuple(float(e) for e in data.get("errors", ())),
        )


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def track_job(
    state: EstimatorState, outcome: JobOutcome, capacity: int, params: JusticeParams
) -> EstimatorState:
    """TRACK_JOB (Algorithm 3): learn from one completed job."""
    _check_capacity(capacity)
    deadline_cpus = outcome.comp_time / outcome.deadline_s
    max_cpus = min(outcome.tasks, capacity)
    min_req_rate = deadline_cpus / max_cpus
    last = outcome.cpus / max_cpus
    error = min_req_rate - last
    ewma = (
        error
        if state.error_ewma is None
        else (params.alpha * error + (1 - params.alpha) * state.error_ewma)
    )
    return EstimatorState(
        completed=state.completed + 1,
        min_frac=min_req_rate if state.min_frac is None else min(state.min_frac, min_req_rate),
        max_frac=min_req_rate if state.max_frac is None else max(state.max_frac, min_req_rate),
        last_frac=last,
        last_success=outcome.success,
        error_sum=state.error_sum + error,
        error_ewma=ewma,
        errors=(*state.errors, error)[-params.error_history :],
    )


# ---------------------------------------------------------------- fraction (Algorithms 4, 5)


def calculate_fraction(state: EstimatorState) -> float:
    """CALCULATE_ALLOC_FRACTION (Algorithm 4): mean of LastCPUFrac and Min- or MaxCPUFrac."""
    if state.last_frac is None or state.min_frac is None or state.max_frac is None:
        raise PolicyError("state", "no completed job yet")
    bound = state.min_frac if state.last_success else state.max_frac
    return (state.last_frac + bound) / 2


def smoothed_error(state: EstimatorState, params: JusticeParams) -> float:
    """CALC_SMOOTHED_AVG of the error list (equal weights or EWMA)."""
    if state.completed == 0:
        return 0.0
    if params.smoothing == "ewma":
        return state.error_ewma if state.error_ewma is not None else 0.0
    return state.error_sum / state.completed


def correct_fraction(state: EstimatorState, fraction: float, params: JusticeParams) -> float:
    """CORRECT_ALLOC_FRACTION + VALIDATE_FRACTION (Algorithm 5): add the correction, clamp."""
    corrected = fraction + smoothed_error(state, params)
    floor = state.min_frac if state.min_frac is not None else 0.0
    return min(max(corrected, floor), 1.0)


def allocation_fraction(state: EstimatorState, params: JusticeParams) -> float | None:
    """The fraction of ``maxCpus`` to grant, or None while bootstrapping (< 2 completions)."""
    if state.completed < 2:
        return None
    if params.variant == "pythia":
        return min(state.max_frac if state.max_frac is not None else 1.0, 1.0)
    return correct_fraction(state, calculate_fraction(state), params)


# ---------------------------------------------------------------- ESTIMATE_REQ


def estimate_req(
    state: EstimatorState, job: Job, now_s: float, capacity: int, params: JusticeParams
) -> int:
    """ESTIMATE_REQ: CPUs a job needs to meet its deadline from now (``docs/policies.md``).

    Shares ``admit``'s arithmetic: ``fraction * deadline / (deadline - queued)`` of ``maxCpus``,
    rounded up, at least 1; ``maxCpus`` while bootstrapping. The result may exceed ``maxCpus``
    (the job is then infeasible).
    """
    _check_capacity(capacity)
    drops, feasible = _triage([job], allocation_fraction(state, params), capacity, now_s)
    if feasible:
        return feasible[0][3]
    req = drops[0].req_cpus
    if req is None:
        raise PolicyError(f"jobs.{job.id}.deadline_s", "no time left to the deadline")
    return req


# ---------------------------------------------------------------- admission (Algorithm 6)


def kills(running: Iterable[RunningJob], now_s: float, drop_threshold: int) -> list[Decision]:
    """Selective dropping (5.1.2): kill violators whose ``requestedTasks`` exceed the threshold."""
    out: list[Decision] = []
    for job in running:
        late = now_s - job.submitted_s - job.deadline_s
        if late > 0 and job.tasks > drop_threshold:
            out.append(
                Decision(
                    "kill",
                    job.id,
                    job.cpus,
                    f"past its deadline by {late:g}s with {job.tasks} tasks > drop_threshold "
                    f"{drop_threshold}",
                    ttd_s=-late,
                )
            )
    return out


_Candidate = tuple[float, float, str, int, float | None, float]
"""A feasible waiting job: (priority, submitted, id, reqCpus, inflated fraction, TTD)."""


def _offers(candidates: list[_Candidate], free_cpus: int) -> list[Decision]:
    """CREATE_OFFERS: one pass in priority order; only whole requests are offered."""
    # ids are unique, so plain tuple order is (priority, submission time, id)
    candidates.sort()
    out: list[Decision] = []
    for priority, _, job_id, req, fraction, ttd in candidates:
        if req <= free_cpus:
            free_cpus -= req
            reason = f"whole request of {req} CPUs fits"
            out.append(Decision("admit", job_id, req, reason, fraction, req, ttd, priority))
        else:
            reason = f"request of {req} CPUs does not fit in {free_cpus} free"
            out.append(Decision("queue", job_id, 0, reason, fraction, req, ttd, priority))
    return out


def _triage(
    waiting: Iterable[Job],
    fraction: float | None,
    capacity: int,
    now_s: float,
    need: Mapping[str, float] | None = None,
) -> tuple[list[Decision], list[_Candidate]]:
    """Drop infeasible jobs (Algorithm 6 lines 3-12) and return the feasible ones.

    ``need`` (the Oracle's exact compTime per job) replaces the estimated fraction when given.
    The request arithmetic of ``_request`` is inlined: this loop runs once per waiting job.
    """
    ceil = math.ceil
    drops: list[Decision] = []
    feasible: list[_Candidate] = []
    for job in waiting:
        ttd = job.deadline_s - (now_s - job.submitted_s)
        if ttd <= 0:
            drops.append(
                Decision("drop", job.id, 0, "time to deadline is gone", fraction, None, ttd)
            )
            continue
        limit = job.tasks if job.tasks < capacity else capacity
        used: float | None = None
        if need is not None:
            req = max(ceil(need[job.id] / ttd - _CEIL_TOLERANCE), 1)
        elif fraction is None:
            req = limit
        else:
            used = fraction * job.deadline_s / ttd
            req = max(ceil(used * limit - _CEIL_TOLERANCE), 1)
        if req > limit:
            reason = f"needs {req} CPUs > min(tasks, capacity) = {limit}"
            drops.append(Decision("drop", job.id, 0, reason, used, req, ttd))
            continue
        feasible.append((req / ttd, job.submitted_s, job.id, req, used, ttd))
    return drops, feasible


def _check_call(free_cpus: int, capacity: int, now_s: float) -> None:
    _check_capacity(capacity)
    _require(
        isinstance(free_cpus, int) and not isinstance(free_cpus, bool) and free_cpus >= 0,
        "free_cpus",
        f"must be a whole number >= 0, got {free_cpus!r}",
    )
    _require(_finite(now_s), "now_s", "must be finite")


def admit(
    state: EstimatorState,
    waiting: Sequence[Job],
    running: Sequence[RunningJob],
    free_cpus: int,
    capacity: int,
    now_s: float,
    params: JusticeParams,
) -> list[Decision]:
    """ADMISSION_CONTROL (Algorithm 6) on a submission or completion.

    Returns kills first, then drops, then one admit or queue per feasible waiting job in priority
    order (``reqCpus / TTD`` ascending).
    """
    _check_call(free_cpus, capacity, now_s)
    killed = kills(running, now_s, params.drop_threshold)
    free = free_cpus + sum(d.cpus for d in killed)
    drops, feasible = _triage(waiting, allocation_fraction(state, params), capacity, now_s)
    return [*killed, *drops, *_offers(feasible, free)]


# ---------------------------------------------------------------- baselines (5.2)


def fair_share(demands: Mapping[str, int], capacity: int) -> dict[str, int]:
    """Baseline FS: integer max-min fair shares of ``capacity`` among jobs capped at their demands.

    Smaller demands are served first; the CPUs that do not divide evenly go to the later
    (larger-demand, then larger-id) jobs, so the result is deterministic.
    """
    _check_capacity(capacity)
    order = sorted(demands, key=lambda j: (demands[j], j))
    remaining = capacity
    out: dict[str, int] = {}
    for k, job in enumerate(order):
        give = min(max(demands[job], 0), remaining // (len(order) - k))
        out[job] = give
        remaining -= give
    return out


def reactive_kills(running: Iterable[RunningJob], now_s: float) -> list[Decision]:
    """Reactive FS: terminate every running job that has exceeded its deadline."""
    return kills(running, now_s, drop_threshold=-1)


def oracle_admit(
    waiting: Sequence[Job],
    comp_times: Mapping[str, float],
    free_cpus: int,
    capacity: int,
    now_s: float,
) -> list[Decision]:
    """Oracle: the exact need ``ceil(compTime / TTD)``, infeasible jobs dropped, same priority."""
    _check_call(free_cpus, capacity, now_s)
    for job in waiting:
        _require(
            job.id in comp_times, f"comp_times.{job.id}", "the Oracle needs every job's compTime"
        )
    drops, feasible = _triage(waiting, None, capacity, now_s, need=comp_times)
    return [*drops, *_offers(feasible, free_cpus)]


# ---------------------------------------------------------------- registry


def _params_spec() -> tuple[ParamSpec, ...]:
    return (
        ParamSpec(
            "smoothing",
            str,
            "mean",
            "error smoothing of Algorithm 5: equal weights or exponential (Justice only)",
            choices=SMOOTHINGS,
        ),
        ParamSpec(
            "alpha",
            float,
            0.5,
            "EWMA weight of the newest error (Justice, smoothing=ewma)",
            minimum=0.0,
            maximum=1.0,
            exclusive_minimum=True,
        ),
        ParamSpec(
            "drop_threshold",
            int,
            1000,
            "running jobs past their deadline are killed when their tasks exceed this",
            minimum=0,
        ),
        ParamSpec(
            "error_history", int, 100, "errors kept in the estimator state for audit", minimum=1
        ),
    )


REGISTRY: tuple[PolicySpec, ...] = (
    PolicySpec(
        name="justice",
        kind="admission",
        summary="Justice: deadline-aware admission from Min/Max/Last CPU fractions of completed "
        "jobs with error correction; drops infeasible jobs, kills large violators.",
        paper="seed 004 (Dimopoulos, PhD thesis, UCSB 2018), chapter 5 (Algorithms 3 to 6)",
        params=_params_spec(),
    ),
    PolicySpec(
        name="pythia",
        kind="admission",
        summary="PYTHIA: deadline-aware admission with one global CPUFrac = max(minReqRate).",
        paper="seed 004 (Dimopoulos, PhD thesis, UCSB 2018), chapter 4 (Algorithms 1 and 2)",
        params=_params_spec(),
    ),
)


def _spec(variant: str) -> PolicySpec:
    return next(s for s in REGISTRY if s.name == variant)


def make_params(variant: str, values: Mapping[str, Any] | None = None) -> JusticeParams:
    """Validate ``values`` against the variant's ``PolicySpec`` (errors name the parameter)."""
    _require(variant in VARIANTS, "policy", f"must be one of {VARIANTS}, got {variant!r}")
    checked = _spec(variant).validate(values or {})
    return JusticeParams(variant=variant, **checked)
