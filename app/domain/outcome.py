"""What a queue policy decided on one tick (``docs/style.md``, "The tick": decide -> plan).

Shared by the policies (which produce it), ``app.control`` (which plans from it) and the audit
trail, so it lives below all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class PolicyOutcome:
    """Shares per managed queue (fractions) or absolute capacities, and what led to them."""

    shares: Mapping[str, float] | None = None
    absolute: Mapping[str, str] | None = None  # RRF: target [memory=MB,vcores=n] per queue
    amounts: Mapping[str, Mapping[str, float]] | None = None  # the same as {"vcores", "memory"}
    state: Mapping[str, Any] | None = None  # new policy state to persist (None: keep)
    details: Mapping[str, Any] = field(default_factory=dict)
    min_change_applies: bool = True
    # True: each queue's maximum-capacity is set to its capacity (it may not borrow idle
    # capacity), for policies whose queues run on fixed shares (Fawkes' None baseline).
    no_borrowing: bool = False
    # The weights the policy considers fair now (Fawkes' ``w_i``, eq. 1), for the simulator's
    # discrimination metric; None: the queues with demand, by their shares.
    fair_weights: Mapping[str, float] | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form for the audit trail."""
        return {
            "shares": dict(self.shares) if self.shares is not None else None,
            "absolute": dict(self.absolute) if self.absolute is not None else None,
            "details": dict(self.details),
            "note": self.note,
        }
