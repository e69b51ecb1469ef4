"""The proportional policy's queue adapter: the shared observation view -> pending vcores per
queue -> shares (``docs/style.md``, "The tick": decide)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.domain.observation import PolicyInputs
from app.domain.outcome import PolicyOutcome
from app.policies.base import QueueContext
from app.policies.proportional import core


def decide(
    view: PolicyInputs,
    queues: tuple[str, ...],
    context: QueueContext,
    state: Mapping[str, Any],
) -> PolicyOutcome:
    """Shares from the interval's mean pending vcores; stateless, so ``state`` passes through."""
    pending = {q: view.queues[q].pending_vcores if q in view.queues else 0.0 for q in queues}
    floor = float(context.params.get("floor", core.FLOOR.default))
    return PolicyOutcome(
        shares=core.shares(pending, floor),
        details={"pending_vcores": pending, "floor": floor},
    )
