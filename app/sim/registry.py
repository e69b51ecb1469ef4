"""Every policy the simulator can run, by name (the ``--policy`` choices of ``simulate``).

Allocators decide per job (thesis seed 004, section 5.2): ``baseline-fs``, ``reactive-fs``,
``oracle``, ``pythia``, ``justice``,
``promise`` (``app/policies/promise``). Queue policies re-set queue shares every interval over the
fair-share cluster (seed 000 section 4, seed 002 section 9.4/9.5): ``fair`` (no controller: the
incumbent scheduler with equal queue weights), ``fawkes:<weighting>``, ``ltrf``, ``mlrf``, ``rrf``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.policies import registry as policy_registry
from app.sim.allocators import BASELINES, BaselineFS
from app.sim.justice_adapter import JusticeAllocator, OracleAllocator
from app.sim.promise_adapter import PromiseAllocator
from app.sim.queue_policies import PlanSettings, make_queue_policy, queue_policy_names
from app.sim.runner import Allocator, QueuePolicy

# Allocators for the admission policies of ``app.policies.registry``, by the folder that owns
# them (the simulator's glue: jobs and estimator per family); ``oracle`` is the simulator's own.
_ADMISSION_ALLOCATORS: dict[str, Callable[[str, dict[str, Any]], Allocator]] = {
    "app.policies.justice": JusticeAllocator,
    "app.policies.promise": lambda _name, values: PromiseAllocator(values),
}
ADMISSION = (
    "oracle",
    *(
        n
        for n in policy_registry.admission_names()
        if policy_registry.family(n) in _ADMISSION_ALLOCATORS
    ),
)
FAIR = "fair"


def allocator_names() -> list[str]:
    """Job allocators."""
    return [*BASELINES, *ADMISSION]


def policy_names() -> list[str]:
    """Every accepted ``--policy``."""
    return [*allocator_names(), FAIR, *queue_policy_names()]


def needs_deadlines(name: str) -> bool:
    """Policies that cannot run without a deadline per job."""
    return name in ADMISSION


@dataclass(frozen=True, slots=True)
class Setup:
    """What one named policy turns into."""

    allocator: Allocator
    queue_policy: QueuePolicy | None


def build(
    name: str,
    queues: Sequence[str],
    params: Mapping[str, Any] | None = None,
    *,
    interval_s: float = 60.0,
    plan: PlanSettings | None = None,
) -> Setup:
    """The allocator (and queue controller) for ``name``; ``ValueError`` when unknown."""
    values = dict(params or {})
    if name in BASELINES:
        return Setup(BASELINES[name](), None)
    if name == "oracle":
        return Setup(OracleAllocator(), None)
    if name in ADMISSION:
        return Setup(_ADMISSION_ALLOCATORS[policy_registry.family(name)](name, values), None)
    if name == FAIR:
        return Setup(BaselineFS(), None)
    if name in queue_policy_names():
        return Setup(
            BaselineFS(), make_queue_policy(name, queues, values, interval_s=interval_s, plan=plan)
        )
    raise ValueError(f"unknown policy {name!r}; use one of {', '.join(policy_names())}")
