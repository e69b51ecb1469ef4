"""The only writer of the scheduler configuration (``docs/style.md``: "one central
actuator"; ``docs/yarn.md`` section 5).

``read_live`` reads what the RM holds now for the managed parent's children (the effective
``/scheduler`` tree, overlaid with the stored ``/scheduler-conf`` strings when the store is
mutable) and its configuration version. ``push`` applies a change set as ONE
``PUT /scheduler-conf`` after ``POST /scheduler-conf/validate``, reads the result back and, if
the RM holds anything but what was sent, restores the previous values with a second PUT, but
only when the configuration version shows that ours was the only write since it was read (a
restore never overwrites an operator's concurrent edit; it is reported instead).

The RM's mutation API has no compare-and-set, so concurrent writes are caught by the
configuration version: read again right before the PUT (moved since the tick read it: nothing is
sent, ``conflict``), and after it (moved by more than our one write: another write landed around
ours, said in the result).

Failures follow ``app.yarn.errors``: a PUT that provably reached no RM (``RMUnreachable``) is
re-sent with exponential backoff, each time after the version check; a PUT that was sent and not
answered (any other ``RMUnavailable``) is never re-sent, as the RM may still apply it: the RM is
read back once, and unless it holds the pushed values the push stays ``unverified`` for the next
tick to settle (``app.control.tick.settle_pending``). ``RMRejected`` is final and its message
(the RM's own text) is returned.
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
from app.yarn.errors import RMError, RMRejected, RMUnavailable, RMUnreachable
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
        sent = await self._put(parent, changes, version_before)
        if isinstance(sent, PushResult):
            return sent
        message, attempts = sent
        return await self._verify(parent, changes, previous, message, attempts, version_before)

    async def _put(
        self, parent: str, changes: QueueValues, version_before: int | None
    ) -> tuple[str, int] | PushResult:
        """The PUT and its attempts, or the result when it was not answered. Each attempt is
        preceded by the version check; only an attempt that reached no RM is sent again."""
        update = SchedConfUpdate(update_queues=changes)
        attempt = 0
        while True:
            conflict = await self._written_since(version_before, attempt)
            if conflict is not None:
                return conflict
            attempt += 1
            try:
                return await self.client.update_scheduler_conf(update), attempt
            except RMRejected as exc:
                return PushResult("rejected", exc.message, attempt, version_before)
            except RMUnreachable as exc:
                if attempt > self.retries:
                    return PushResult("unavailable", exc.message, attempt, version_before)
                await self._sleep(self.backoff_s * 2 ** (attempt - 1))
            except RMUnavailable as exc:
                return await self._after_lost_put(
                    parent, changes, exc.message, attempt, version_before
                )

    async def _written_since(self, version_before: int | None, attempts: int) -> PushResult | None:
        """``conflict`` when the configuration version moved since the tick read it: another
        write landed in between, and a PUT now could overwrite it."""
        if version_before is None:
            return None  # no version to compare (read_live found no mutable store)
        try:
            now, _ = await self._retrying(self.client.scheduler_conf_version)
        except RMError as exc:
            return PushResult(
                "unavailable",
                f"configuration version unreadable before the PUT: {exc.message}",
                attempts,
                version_before,
            )
        if now == version_before:
            return None
        log.error("configuration version moved from %s to %s before the PUT", version_before, now)
        return PushResult(
            "conflict",
            f"the configuration version moved from {version_before} to {now} after this tick "
            "read it: another write landed, so nothing was sent (not overwritten)",
            attempts,
            version_before,
        )

    async def _after_lost_put(
        self,
        parent: str,
        changes: QueueValues,
        message: str,
        attempts: int,
        version_before: int | None,
    ) -> PushResult:
        """The PUT was sent and not answered: the RM may have applied it, may apply it later (it
        finishes a request the client gave up on) or never. It is not sent again, since a second
        copy in flight could land after an operator's next edit and overwrite it; unless the RM
        already holds it, the push stays ``unverified`` and the next tick settles it."""
        await self._sleep(self.backoff_s)
        try:
            live, _ = await self._retrying(lambda: self.read_live(parent))
        except RMError as exc:
            return PushResult(
                "unverified",
                f"{message}; read-back failed too, the PUT may have been applied: {exc.message}",
                attempts,
                version_before,
            )
        if differences(changes, live.values):
            return PushResult(
                "unverified",
                f"{message}; the RM does not hold the pushed values (configuration version "
                f"{live.version}) but may still apply them: not re-sent, the next tick settles it",
                attempts,
                version_before,
                None,
                live.values,
            )
        return applied_result(
            f"applied (the answer was lost: {message})", attempts, version_before, live
        )

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
            return applied_result(message, attempts, version_before, live)
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


def applied_result(
    message: str, attempts: int, version_before: int | None, live: LiveConfig
) -> PushResult:
    """The RM holds the pushed values; a version that moved by more than our one write says that
    another write landed between the check before the PUT and the read-back. That window is what
    remains without compare-and-set: if the other write changed these queues before our PUT, ours
    overwrote it, so the result says so."""
    known = version_before is not None and live.version is not None
    if known and not only_our_write(version_before, live.version):
        log.error(
            "another write landed around the PUT: version %s -> %s", version_before, live.version
        )
        message = (
            f"{message}; the configuration version moved from {version_before} to "
            f"{live.version}, not by one: another write landed between this tick's last "
            "check and the read-back (if it changed these queues before the PUT, the PUT "
            "overwrote it)"
        )
    return PushResult("applied", message, attempts, version_before, live.version, live.values)


def only_our_write(version_before: int | None, version_now: int | None) -> bool:
    """True when the configuration version shows exactly one write (ours) since it was read."""
    return version_before is not None and version_now == version_before + 1
