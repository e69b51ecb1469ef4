"""The RM's live scheduler configuration and what became of a push, as plain values
(``docs/style.md``, "The tick": observe and act). Produced by ``app.yarn.actuator``; read by the
pure tick logic in ``app.control.tick`` and the audit rows in ``app.db``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.domain.model import QueueState, SchedulerSettings


@dataclass(frozen=True, slots=True)
class LiveConfig:
    """The managed parent's children as the RM holds them now."""

    parent: str
    queues: tuple[QueueState, ...]
    values: Mapping[str, Mapping[str, str]]
    version: int | None
    conf_error: str | None = None
    scheduler: SchedulerSettings = field(default_factory=SchedulerSettings)

    def to_dict(self) -> dict[str, Any]:
        """JSON form for the audit trail."""
        return {
            "parent": self.parent,
            "version": self.version,
            "values": {q: dict(v) for q, v in sorted(self.values.items())},
            "conf_error": self.conf_error,
            "scheduler": self.scheduler.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class PushResult:
    """What happened to one push. ``status``: applied, rejected (validation or PUT), unavailable
    (no RM reached; nothing applied), conflict (the configuration version moved after the tick
    read it; nothing sent), unverified (PUT answered but the read-back failed, or sent and not
    answered and the RM does not hold it yet: a later tick settles it), reverted
    (read-back differed, previous values restored and read back), revert_failed, superseded
    (read-back differed and the version shows another write after ours: nothing restored)."""

    status: str
    message: str
    attempts: int
    version_before: int | None = None
    version_after: int | None = None
    readback: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    mismatches: Mapping[str, Any] = field(default_factory=dict)

    @property
    def applied(self) -> bool:
        """True when the RM now holds exactly what was sent."""
        return self.status == "applied"

    def to_dict(self) -> dict[str, Any]:
        """JSON form for the audit trail."""
        return {
            "status": self.status,
            "message": self.message,
            "attempts": self.attempts,
            "version_before": self.version_before,
            "version_after": self.version_after,
            "readback": {q: dict(v) for q, v in sorted(self.readback.items())},
            "mismatches": dict(self.mismatches),
        }
