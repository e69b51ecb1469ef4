"""Shared vocabulary of the policy engines: parameter specs, validation errors, registry entries.

Every policy module exports ``REGISTRY: tuple[PolicySpec, ...]``; ``app.policies.registry``
collects them so the controller, the simulator and the playground look policies up by name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from app.domain.observation import PolicyInputs
    from app.domain.outcome import PolicyOutcome


class PolicyError(ValueError):
    """A policy input or parameter is invalid; ``field`` names the offending key (dotted path)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def finite_number(
    value: Any,
    where: str,
    *,
    low: float | None = 0,
    high: float | None = None,
    positive: bool = False,
) -> float:
    """``value`` as a float within ``[low, high]`` (``(low, high]`` when ``positive``; no lower
    bound when ``low`` is None), or a ``PolicyError`` naming ``where``. Booleans, NaN and
    infinities are refused. The one number check of policy parameters, inputs and scenarios."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise PolicyError(where, f"must be a finite number, got {value!r}")
    if positive and low is None:
        low = 0
    if low is None:
        low = -math.inf
    if value < low or (positive and value == low) or (high is not None and value > high):
        if high is not None:
            bound = f"within {low}..{high}"
        else:
            bound = f"> {low}" if positive else f">= {low}"
        raise PolicyError(where, f"must be {bound}, got {value!r}")
    return float(value)


class _Fields(Protocol):
    def _asdict(self) -> dict[str, Any]: ...


def decision_dict(decision: _Fields) -> dict[str, Any]:
    """An admission decision's JSON form (audit records, the playground, ETAs): its fields in
    their order, its ``job_id`` first and named ``id``."""
    fields = decision._asdict()
    return {"id": fields.pop("job_id"), **fields}


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """One tunable parameter of a policy, with its default and an inclusive valid range."""

    name: str
    kind: type  # float, int, str or bool
    default: Any
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False

    def validate(self, value: Any, prefix: str = "") -> Any:
        """Return ``value`` coerced to ``kind`` or raise ``PolicyError`` naming the parameter."""
        where = f"{prefix}{self.name}"
        if self.kind is bool:
            if not isinstance(value, bool):
                raise PolicyError(where, f"must be true or false, got {value!r}")
            return value
        if self.kind in (int, float):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise PolicyError(where, f"must be a number, got {value!r}")
            if not math.isfinite(value):
                raise PolicyError(where, f"must be a finite number, got {value!r}")
            if self.kind is int and int(value) != value:
                raise PolicyError(where, f"must be a whole number, got {value!r}")
            num = self.kind(value)
            if self.minimum is not None and (
                num < self.minimum or (self.exclusive_minimum and num == self.minimum)
            ):
                op = ">" if self.exclusive_minimum else ">="
                raise PolicyError(where, f"must be {op} {self.minimum}, got {value!r}")
            if self.maximum is not None and (
                num > self.maximum or (self.exclusive_maximum and num == self.maximum)
            ):
                op = "<" if self.exclusive_maximum else "<="
                raise PolicyError(where, f"must be {op} {self.maximum}, got {value!r}")
            return num
        if not isinstance(value, str):
            raise PolicyError(where, f"must be a string, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise PolicyError(where, f"must be one of {', '.join(self.choices)}, got {value!r}")
        return value


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A named policy: what kind of decision it makes and the parameters it accepts."""

    name: str
    kind: str  # "queue" (decides queue shares) or "admission" (decides job admission)
    summary: str
    paper: str
    params: tuple[ParamSpec, ...] = field(default_factory=tuple)
    # The queue adapter (view -> policy inputs -> outcome); every queue policy sets it.
    decide: QueuePolicy | None = None
    # The parameter a ``name:<value>`` suffix sets (``fawkes:TD`` sets ``weighting``).
    suffix_param: str | None = None
    # Pushes absolute resources (``[memory=..,vcores=..]``): percentage bounds have no fixed
    # meaning then, so the configuration refuses them.
    absolute: bool = False
    # The fraction of the cluster a simulation reserves as equal minimum shares when the operator
    # gives none (Fawkes' core nodes, seed 000 section 7.3); 0 for policies that need none.
    reserved_share: float = 0.0
    # The optional fields of the observation view (``QueueInputs``) that these validated
    # parameters decide on, each with what it measures; a caller whose view lacks one refuses the
    # configuration rather than let the policy decide on zeros.
    needs: Callable[[Mapping[str, Any]], Mapping[str, str]] | None = None
    # The admission adapter (validated parameters -> an ``AdmissionPolicy``); None for queue,
    # placement and task policies.
    admission: AdmissionPolicyFactory | None = None

    def defaults(self) -> dict[str, Any]:
        """The parameters with their default values."""
        return {p.name: p.default for p in self.params}

    def validate(self, values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        """Defaults overlaid with ``values``; unknown names and bad values raise ``PolicyError``."""
        known = {p.name: p for p in self.params}
        for key in values:
            if key not in known:
                raise PolicyError(f"{prefix}{key}", f"unknown parameter of policy {self.name}")
        out = self.defaults()
        for key, value in values.items():
            out[key] = known[key].validate(value, prefix)
        return out


Validator = Callable[[Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class QueueContext:
    """What the operator configured around a queue policy: validated parameters, queue weights,
    minimum shares (fractions, from the minimum bounds) and the control interval; and the measured
    long-term usage ledger (``app.control.ledger``: counted vcore-seconds and debt per queue),
    which the caller integrates from observations so every policy sees the same one."""

    params: Mapping[str, Any]
    weights: Mapping[str, float]
    min_shares: Mapping[str, float]
    interval_s: float
    counted: Mapping[str, float] = field(default_factory=dict)
    debt: Mapping[str, float] = field(default_factory=dict)


class QueuePolicy(Protocol):
    """A queue policy's seam: one tick's observation view, the configured context and the policy
    state persisted by the previous tick -> an outcome (whose ``state`` is the new state)."""

    def __call__(
        self,
        view: PolicyInputs,
        queues: tuple[str, ...],
        context: QueueContext,
        state: Mapping[str, Any],
    ) -> PolicyOutcome: ...


# ---- admission policies ------------------------------------------------------------------------


class AdmissionPolicy(Protocol):
    """An admission policy's seam: one round's waiting and running jobs, the free and total
    deadline vcores, the time and the estimator -> one decision per job; and what a finished
    job teaches the estimator.

    ``estimator_source`` says where the live sidecar keeps the estimator: ``"state"`` (one
    persisted estimator row, updated by ``learn``) or ``"history"`` (rebuilt from every learned
    observation). ``booked`` is what the running jobs hold, so free = capacity - booked.

    ``monotone``: a waiting job that did not fit cannot fit later while the estimator and the
    capacity stay the same and the free vcores do not grow (its request only grows as its
    deadline nears), so a round on new submissions alone decides them exactly as a round over
    every waiting job would (``app.jobs.rounds``); and whether a waiting job is dropped depends
    on that job, the estimator, the capacity and the time alone, so a tick may rank the waiting
    jobs before taking the admission lock (``app.jobs.tick_round``).

    ``waiting_filter``: for a monotone policy, which waiting jobs a round with ``free`` CPUs
    (after its kills) can change (``WaitingFilter``), so that a round reads only those; ``None``
    when any of them may change."""

    name: str
    params: Mapping[str, Any]
    estimator_source: str
    monotone: bool

    def booked(self, running: Sequence[Any]) -> int: ...

    def admit(
        self,
        waiting: Sequence[Any],
        running: Sequence[Any],
        free: int,
        capacity: int,
        now: float,
        estimator: Any,
    ) -> Sequence[Any]: ...

    def learn(self, estimator: Any, outcome: Any, capacity: int) -> Any: ...

    def waiting_filter(self, estimator: Any, free: int) -> WaitingFilter | None: ...


@dataclass(frozen=True, slots=True)
class WaitingFilter:
    """The waiting jobs an admission round can change, in terms a database query can test
    (``AdmissionPolicy.waiting_filter``; rounds of Algorithm 6, whose request for a job with
    deadline window ``D`` and ``TTD`` left is ``ceil(fraction * D / TTD * min(tasks,
    capacity))``, all of ``min(tasks, capacity)`` while ``fraction`` is None). Every other
    waiting job stays queued, and a queued decision changes nothing.

    * ``horizon``: jobs with less than ``horizon`` of their window left may be dropped;
    * ``free``: jobs whose request fits in ``free`` CPUs may be admitted (none when 0)."""

    horizon: float
    fraction: float | None
    free: int


# Validated parameters -> the policy; set on a ``PolicySpec`` as its ``admission`` hook.
AdmissionPolicyFactory = Callable[[Mapping[str, Any]], AdmissionPolicy]
