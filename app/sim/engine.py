"""Discrete-event engine of the trace-driven simulator (thesis seed 004, sections 4.2 and 5.2).

The PYTHIA/Justice evaluation ran on a SimPy-based simulator; this is the same core idea as SimPy's
``core.py`` (``docs/style.md``): a heap of ``(time, priority, seq, event)`` so that events
at the same instant run in priority order and then in scheduling order, which makes every run
deterministic. Cancellation is lazy (a cancelled event stays in the heap and is skipped) because
re-heapifying on every cancel would cost O(n) and the cluster model re-plans completions often.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

# Lower runs first at equal times: completions free resources before arrivals try to use them,
# and measurement samples see the state after both.
PRIORITY_COMPLETION = 0
PRIORITY_CONTROL = 1
PRIORITY_ARRIVAL = 2
PRIORITY_SAMPLE = 3


@dataclass(eq=False, slots=True)
class Event:
    """A callback due at ``time``; ``cancelled`` events are skipped when popped."""

    time: float
    priority: int
    seq: int
    action: Callable[[], None]
    cancelled: bool = field(default=False)

    def cancel(self) -> None:
        """Mark the event so the engine drops it instead of running it."""
        self.cancelled = True


class Engine:
    """A simulated clock and a heap of pending events.

    ``now`` only moves forward, to the time of the event being run. Time is plain seconds.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._heap: list[tuple[float, int, int, Event]] = []
        self._seq = itertools.count()
        self.processed = 0

    @property
    def now(self) -> float:
        """The simulated time of the event being processed (or of the last one)."""
        return self._now

    def schedule(self, at: float, action: Callable[[], None], priority: int = 1) -> Event:
        """Run ``action`` at absolute time ``at`` (never earlier than ``now``)."""
        if math.isnan(at):
            raise ValueError("event time is NaN")
        when = max(at, self._now)
        event = Event(when, priority, next(self._seq), action)
        heapq.heappush(self._heap, (when, priority, event.seq, event))
        return event

    def peek(self) -> float:
        """Time of the next live event, or ``inf`` when nothing is pending."""
        heap = self._heap
        while heap and heap[0][3].cancelled:
            heapq.heappop(heap)
        return heap[0][0] if heap else math.inf

    def step(self) -> bool:
        """Run the next live event; False when the heap is empty."""
        heap = self._heap
        while heap:
            when, _, _, event = heapq.heappop(heap)
            if event.cancelled:
                continue
            self._now = when
            self.processed += 1
            event.action()
            return True
        return False

    def run(self, until: float | None = None) -> None:
        """Process events up to and including time ``until`` (all of them when None).

        With ``until`` the clock ends at ``until`` even if the last event came earlier, like
        SimPy's ``run(until=...)``.
        """
        limit = math.inf if until is None else until
        while True:
            nxt = self.peek()
            if nxt == math.inf or nxt > limit:
                break
            self.step()
        if until is not None and until > self._now:
            self._now = until
