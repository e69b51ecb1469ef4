"""``LoopService``: a unit of periodic work with ``run_once(now_ms)`` (after Prefect's loop
services; ``docs/style.md``).

Time is an argument so tests drive ticks with any clock. ``start(loops=N)`` runs a fixed-rate loop
(the CLI and tests use it); in the server, ``app.services.runtime`` schedules ``tick()`` instead.
A tick that raises is logged and the loop goes on: one bad tick never stops the service. While a
``gate`` is closed (a follower, ``app.services.leader``) a tick runs ``run_gated`` instead.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

Clock = Callable[[], int]


def wall_clock_ms() -> int:
    """Epoch milliseconds from the system clock (the default clock)."""
    return int(time.time() * 1000)


class LoopService(abc.ABC):
    """Periodic work at a fixed rate measured from the start of each tick."""

    name: str = "loop"

    def __init__(self, interval_s: float, clock: Clock = wall_clock_ms) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self.log = logging.getLogger(type(self).__module__)
        self._stopping = asyncio.Event()
        self.ticks = 0
        # When set, a tick runs only while it answers True (the leader's loops, ``Runtime``).
        self.gate: Callable[[], bool] | None = None

    @abc.abstractmethod
    async def run_once(self, now_ms: int) -> None:
        """Do one tick's work as of ``now_ms``."""

    async def run_gated(self, now_ms: int) -> None:
        """What a tick does while the gate is closed (a follower): nothing unless overridden."""
        return None

    async def tick(self) -> None:
        """One tick with error containment and an overrun warning."""
        gated = self.gate is not None and not self.gate()
        work = self.run_gated if gated else self.run_once
        started = time.monotonic()
        try:
            await work(self.clock())
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log.exception("%s tick%s failed", self.name, " (gated)" if gated else "")
        if gated:
            return
        self.ticks += 1
        took = time.monotonic() - started
        if took > self.interval_s:
            self.log.warning(
                "%s tick took %.1fs, longer than its %.1fs interval",
                self.name,
                took,
                self.interval_s,
            )

    async def start(self, loops: int | None = None) -> None:
        """Run ``loops`` ticks (forever when ``None``) at a fixed rate, until ``stop()``."""
        self._stopping.clear()
        done = 0
        while not self._stopping.is_set() and (loops is None or done < loops):
            started = time.monotonic()
            await self.tick()
            done += 1
            if loops is not None and done >= loops:
                break
            delay = max(0.0, self.interval_s - (time.monotonic() - started))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=delay)

    def stop(self) -> None:
        """Ask the loop to finish after the current tick (interruptible sleep)."""
        self._stopping.set()
