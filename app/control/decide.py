"""Run the configured queue policy on one tick's view (``docs/style.md``, "The tick": decide).

Generic: the policy is looked up in ``app.policies.registry`` and its own queue adapter
(``app/policies/<name>/queue.py``) turns the shared observation view into its outcome. This module
only builds the ``QueueContext`` the adapters see from the operator's configuration and the
measured ledger, so the live controller and the simulator hand every policy the same context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.control.config import ControlConfig
from app.control.ledger import LedgerState
from app.domain.observation import PolicyInputs
from app.domain.outcome import PolicyOutcome
from app.policies import registry
from app.policies.base import PolicyError, QueueContext


def context(
    cfg: ControlConfig, queues: Sequence[str], ledger: LedgerState | None = None
) -> QueueContext:
    """The operator's configuration as a queue policy sees it (minimum bounds as fractions),
    with the measured ledger's counted usage and debt."""
    return QueueContext(
        params=dict(cfg.params),
        weights={q: cfg.weight(q) for q in queues},
        min_shares={q: cfg.bounds[q].min_h / 10000 for q in queues if q in cfg.bounds},
        interval_s=cfg.interval_s,
        counted=dict(ledger.counted) if ledger is not None else {},
        debt=dict(ledger.debt) if ledger is not None else {},
    )


def run_policy(
    cfg: ControlConfig,
    inputs: PolicyInputs,
    queues: Sequence[str],
    state: Mapping[str, Any],
    ledger: LedgerState | None = None,
) -> PolicyOutcome:
    """The configured policy's outcome; ``PolicyError`` for an unknown one."""
    spec = registry.lookup(cfg.policy)
    if spec.decide is None:
        raise PolicyError("policy", f"{spec.name!r} is not a queue policy")
    return spec.decide(inputs, tuple(queues), context(cfg, queues, ledger), state)
