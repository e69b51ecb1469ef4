"""The only writer of the scheduler configuration (``docs/style.md``: "one central
actuator"; ``docs/yarn.md`` section 5).

``read_live`` reads what the RM holds now for the managed parent's children (the effective
``/scheduler`` tree, overlaid with the stored ``/scheduler-conf`` strings when the store is
mutable) and its configuration version. ``push`` applies a change set as ONE
``PUT /scheduler-conf`` after ``POST /scheduler-conf/validate``, reads the result back and, if
the RM holds anything but what was sent, restores the previous values with a second PUT, but
only when the configuration version shows that ours was the only write since it was read (an
operator's concurrent edit is never overwritten; it is reported instead).

Failures follow ``app.yarn.errors``: ``RMUnavailable`` is retried with exponential backoff
(before re-sending a PUT the configuration is read back, so a PUT that landed but whose answer was
lost is not sent twice, and after the last failed attempt the RM is read once more before
reporting that nothing was applied); ``RMRejected`` is final and its message (the RM's own text)
is returned.
The RM applies or reverts a mutation as a whole (``docs/yarn.md`` 5.2), so a push is never half
applied; the read-back makes sure of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, TypeVar

from app.control.budget import format_hundredths, to_hundredths
from app.control.drift import QueueValues, differences
from app.domain.live import LiveConfig, PushResult
from app.domain.model import QueueState, SchedulerSettings
from app.yarn.errors import RMError, RMRejected, RMUnavailable
from app.yarn.wire import SchedConfUpdate

log = logging.getLogger(__name__)

CONF_PREFIX = "yarn.scheduler.capacity."
KEYS = ("capacity", "maximum-capacity")
_T = TypeVar("_T")


class ConfClient(Protocol):
    """What the actuator needs of ``RMClient``."""

    async def scheduler(self) -> tuple[QueueState, ...]: ...

    async def scheduler_conf(self) -> dict[str, str]: ...

    async def scheduler_conf_version(self) -> int: ...

    async def update_scheduler_conf(self, update: SchedConfUpdate) -> str: ...

    async def validate_scheduler_conf(self, update: SchedConfUpdate) -> None: ...

    async def scheduler_settings(self) -> SchedulerSettings: ...


def children(queues: tuple[QueueState, ...], parent: str) -> tuple[QueueState, ...]:
    """The direct children of ``parent`` in the RM's tree."""
    return tuple(q for q in queues if q.parent == parent)


def live_values(
    queues: tuple[QueueState, ...], conf: Mapping[str, str] | None
) -> dict[str, dict[str, str]]:
    """``capacity``/``maximum-capacity`` per queue: the stored string when the mutable store has
    one (it shows absolute ``[memory=..]`` values as written), else the effective percentage."""
    out: dict[str, dict[str, str]] = {}
    for q in queues:
        effective = {
            "capacity": format_hundredths(to_hundredths(q.capacity)),
            "maximum-capacity": format_hundredths(to_hundredths(q.max_capacity)),
        }
        stored = conf or {}
        out[q.path] = {k: stored.get(f"{CONF_PREFIX}{q.path}.{k}", effective[k]) for k in KEYS}
    return out


class Actuator:
    """Applies capacity changes to the RM, safely; nothing else writes scheduler configuration."""

    def __init__(
        self,
        client: ConfClient,
        *,
        retries: int = 3,
        backoff_s: float = 1.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.client = client
        self.retries = retries
        self.backoff_s = backoff_s
        self._sleep = sleep

    async def read_live(self, parent: str) -> LiveConfig:
        """The managed parent's children now; ``RMError`` if the tree cannot be read."""
        queues = children(await self.client.scheduler(), parent)
        conf: dict[str, str] | None
        conf_error = None
        version: int | None
        try:
            conf = await self.client.scheduler_conf()
            version = await self.client.scheduler_conf_version()
        except RMRejected as exc:
            # An immutable store (``file``) has no /scheduler-conf: still fine for advising.
            conf, version, conf_error = None, None, exc.message
        try:
            settings = await self.client.scheduler_settings()
        except RMError as exc:
            # The /conf servlet may be closed to the sidecar's user: assume no preemption.
            settings = SchedulerSettings(error=exc.message)
        values = live_values(queues, conf)
        return LiveConfig(parent, queues, values, version, conf_error, settings)

    async def _retrying(self, call: Callable[[], Awaitable[_T]]) -> tuple[_T, int]:
        attempt = 0
        while True:
            attempt += 1
            try:
                return await call(), attempt
            except RMUnavailable:
                if attempt > self.retries:
                    raise
                await self._sleep(self.backoff_s * 2 ** (attempt - 1))

    async def validate(self, changes: Mapping[str, Mapping[str, str]]) -> None:
        """``POST /scheduler-conf/validate``; ``RMRejected`` with the RM's reason."""
        update = SchedConfUpdate(update_queues=changes)
        await self._retrying(lambda: self.client.validate_scheduler_conf(update))

    async def push(
        self,
        parent: str,
        changes: Mapping[str, Mapping[str, str]],
        previous: Mapping[str, Mapping[str, str]],
        version_before: int | None,
    ) -> PushResult:
        """Validate, PUT once, read back and verify; restore ``previous`` on a mismatch."""
        try:
            await self.validate(changes)
        except RMRejected as exc:
            return PushResult("rejected", f"validation: {exc.message}", 0, version_before)
        except RMUnavailable as exc:
            return PushResult("unavailable", f"validation: {exc.message}", 0, version_before)
        try:
            message, attempts = await self._put(parent, changes)
        except RMRejected as exc:
            return PushResult("rejected", exc.message, 1, version_before)
        except RMUnavailable as exc:
            return await self._after_lost_put(parent, changes, exc.message, version_before)
        return await self._verify(parent, changes, previous, message, attempts, version_before)

    async def _put(self, parent: str, changes: Mapping[str, Mapping[str, str]]) -> tuple[str, int]:
        """One PUT; after a temporary failure, re-send only if the RM does not hold it yet."""
        update = SchedConfUpdate(update_queues=changes)
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self.client.update_scheduler_conf(update), attempt
            except RMUnavailable:
                if attempt > self.retries:
                    raise
                await self._sleep(self.backoff_s * 2 ** (attempt - 1))
                if await self._holds(parent, changes):
                    return "applied (the answer to an earlier attempt was lost)", attempt

    async def _after_lost_put(
        self, parent: str, changes: QueueValues, message: str, version_before: int | None
    ) -> PushResult:
        """The last attempt failed too, but its PUT may still have landed: the RM decides."""
        attempts = self.retries + 1
        try:
            live = await self.read_live(parent)
        except RMError as exc:
            return PushResult(
                "unverified",
                f"{message}; read-back failed too, the PUT may have been applied: {exc.message}",
                attempts,
                version_before,
            )
        if differences(changes, live.values):
            return PushResult("unavailable", message, attempts, version_before)
        return PushResult(
            "applied",
            f"applied (the answer to the last attempt was lost: {message})",
            attempts,
            version_before,
            live.version,
            live.values,
        )

    async def _holds(self, parent: str, changes: QueueValues) -> bool:
        try:
            live = await self.read_live(parent)
        except RMError:
            return False
        return not differences(changes, live.values)

    async def _verify(
        self,
        parent: str,
        changes: Mapping[str, Mapping[str, str]],
        previous: Mapping[str, Mapping[str, str]],
        message: str,
        attempts: int,
        version_before: int | None,
    ) -> PushResult:
        try:
            live, _ = await self._retrying(lambda: self.read_live(parent))
        except RMError as exc:
            return PushResult(
                "unverified",
                f"{message}; read-back failed: {exc.message}",
                attempts,
                version_before,
            )
        mismatches = differences(changes, live.values)
        if not mismatches:
            return PushResult(
                "applied", message, attempts, version_before, live.version, live.values
            )
        if not only_our_write(version_before, live.version):
            # Someone else wrote after our PUT: restoring would overwrite their edit. Our write
            # did land, but its version is unknown, so the controller compares values (drift).
            log.error("read-back differs and another write followed ours, not restoring")
            return PushResult(
                "superseded",
                f"{message}; read-back differs and the configuration version moved from "
                f"{version_before} to {live.version}: another write followed, left as it is",
                attempts,
                version_before,
                None,
                live.values,
                mismatches,
            )
        log.error("read-back differs from what was pushed, restoring: %s", mismatches)
        status, note = await self._restore(parent, previous)
        return PushResult(
            status,
            f"{message}; read-back differs from the push; {note}",
            attempts,
            version_before,
            live.version,
            live.values,
            mismatches,
        )

    async def _restore(
        self, parent: str, previous: Mapping[str, Mapping[str, str]]
    ) -> tuple[str, str]:
        """Send ``previous`` back and read it back: ``reverted`` only if the RM holds it."""
        try:
            await self._retrying(
                lambda: self.client.update_scheduler_conf(SchedConfUpdate(update_queues=previous))
            )
            live, _ = await self._retrying(lambda: self.read_live(parent))
        except RMError as exc:
            log.error("could not restore the previous configuration: %s", exc)
            return "revert_failed", f"restore failed: {exc.message}"
        left = differences(previous, live.values)
        if left:
            log.error("the restored configuration reads back differently: %s", left)
            return "revert_failed", f"restore read back differently: {left}"
        return "reverted", "previous values restored"


def only_our_write(version_before: int | None, version_now: int | None) -> bool:
    """True when the configuration version shows exactly one write (ours) since it was read."""
    return version_before is not None and version_now == version_before + 1
