"""A constructed ResourceManager for controller and actuator tests: a CapacityScheduler with the
children of ``root`` in percentage mode, a configuration version, and failure switches."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from app.domain.model import QueueState, SchedulerSettings
from app.yarn.errors import RMRejected, RMUnavailable, RMUnreachable
from app.yarn.wire import SchedConfUpdate
from tests.factories import queue

PREFIX = "yarn.scheduler.capacity."


@dataclass
class FakeRM:
    """Children of root: path -> {capacity, maximum-capacity} (strings, as stored)."""

    conf: dict[str, dict[str, str]]
    version: int = 1
    down: bool = False
    put_failures: int = 0  # the next N PUTs raise RMUnreachable (never sent)
    apply_before_failing: bool = False  # ... after applying (the answer was lost)
    corrupt: dict[str, str] = field(default_factory=dict)  # next PUT: queue -> value kept instead
    puts: list[dict[str, dict[str, str]]] = field(default_factory=list)
    validations: int = 0
    reject: str | None = None  # validation refuses with this message
    settings: SchedulerSettings = field(
        default_factory=lambda: SchedulerSettings(
            monitor_enabled=False, min_allocation_mb=128, min_allocation_vcores=1
        )
    )

    def _check(self) -> None:
        if self.down:
            raise RMUnavailable("connection refused")

    async def scheduler(self) -> tuple[QueueState, ...]:
        self._check()
        return self.states()

    def states(self) -> tuple[QueueState, ...]:
        """The queue tree as ``/scheduler`` maps it (root first)."""
        out = [queue("root", capacity=100, leaf=False)]
        for path, values in sorted(self.conf.items()):
            q = queue(path, capacity=_percent(values["capacity"]))
            out.append(_with_max(q, _percent(values.get("maximum-capacity", "100"))))
        return tuple(out)

    async def scheduler_conf(self) -> dict[str, str]:
        self._check()
        return {f"{PREFIX}{q}.{k}": v for q, values in self.conf.items() for k, v in values.items()}

    async def scheduler_settings(self) -> SchedulerSettings:
        self._check()
        return self.settings

    async def scheduler_conf_version(self) -> int:
        self._check()
        return self.version

    def _merged(self, update: SchedConfUpdate) -> dict[str, dict[str, str]]:
        merged = {q: dict(v) for q, v in self.conf.items()}
        for q, params in update.update_queues.items():
            if q not in merged:
                raise RMRejected(400, f"Failed to re-init queues : Queue {q} not found")
            merged[q].update(params)
        absolute = [v["capacity"].startswith("[") for v in merged.values()]
        if any(absolute):
            if not all(absolute):
                raise RMRejected(400, "Failed to re-init queues : mixed capacity modes")
            vcores = sum(_vcores(v["capacity"]) for v in merged.values())
            if vcores > CLUSTER_VCORES:
                raise RMRejected(400, f"Failed to re-init queues : {vcores} vcores > cluster")
            return merged
        total = sum(float(v["capacity"]) for v in merged.values())
        if abs(total - 100) > 1e-6:
            raise RMRejected(
                400,
                f"Failed to re-init queues : Illegal capacity sum of {total / 100:g} for children "
                "of queue root for label=. It should be either 0 or 1.0",
            )
        return merged

    async def validate_scheduler_conf(self, update: SchedConfUpdate) -> None:
        self._check()
        self.validations += 1
        if self.reject:
            raise RMRejected(
                400, f"CapacityScheduler configuration validation failed:{self.reject}"
            )
        self._merged(update)

    async def update_scheduler_conf(self, update: SchedConfUpdate) -> str:
        self._check()
        self.puts.append({q: dict(v) for q, v in update.update_queues.items()})
        if self.put_failures and not self.apply_before_failing:
            self.put_failures -= 1
            raise RMUnreachable("connection refused")
        merged = self._merged(update)
        for q, cap in self.corrupt.items():
            if q in update.update_queues:
                merged[q]["capacity"] = cap
        self.corrupt = {}  # one PUT only: the restore goes through
        self.conf = merged
        self.version += 1
        if self.put_failures:
            self.put_failures -= 1
            raise RMUnavailable("read timeout after sending")
        return "Configuration change successfully applied."

    def hand_edit(self, values: dict[str, dict[str, str]]) -> None:
        """Someone else's PUT."""
        for q, params in values.items():
            self.conf[q].update(params)
        self.version += 1


# The one NodeManager the controller tests record (``record_poll``): 8 vcores, 8192 MB.
CLUSTER_VCORES = 8


def _vcores(absolute: str) -> int:
    match = re.search(r"vcores=(\d+)", absolute)
    assert match is not None, absolute
    return int(match.group(1))


def _percent(value: str) -> float:
    """A capacity as the percentage ``/scheduler`` reports: an absolute ``[memory=..,vcores=..]``
    as its share of the cluster's vcores."""
    return _vcores(value) / CLUSTER_VCORES * 100 if value.startswith("[") else float(value)


def _with_max(q: QueueState, max_capacity: float) -> QueueState:
    from dataclasses import replace

    return replace(q, max_capacity=max_capacity, absolute_max_capacity=max_capacity)


class LateRM(FakeRM):
    """While ``slow``: a PUT is sent and times out on the client's side; the RM applies the
    first one only at ``land_late`` (a slow RM finishing a request the client gave up on)."""

    slow = False
    in_flight: SchedConfUpdate | None = None

    async def update_scheduler_conf(self, update: SchedConfUpdate) -> str:
        if not self.slow:
            return await super().update_scheduler_conf(update)
        self.puts.append({q: dict(v) for q, v in update.update_queues.items()})
        self.in_flight = self.in_flight or update
        raise RMUnavailable("PUT /scheduler-conf may or may not have been applied: read timeout")

    def land_late(self) -> None:
        assert self.in_flight is not None
        self.conf = self._merged(self.in_flight)
        self.version += 1
        self.slow, self.in_flight = False, None


def two_queues(a: str = "50", b: str = "50") -> FakeRM:
    return FakeRM(
        {
            "root.a": {"capacity": a, "maximum-capacity": "100"},
            "root.b": {"capacity": b, "maximum-capacity": "100"},
        }
    )


async def no_sleep(_: float) -> None:
    return None
