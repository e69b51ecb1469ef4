"""Discrete-event engine of the trace-driven simulator (thesis seed 004, sections 4.2 and 5.2).

The PYTHIA/Justice evaluation ran on a SimPy-based simulator; this is the same core idea as SimPy's
``core.py`` (``docs/style.md``): a heap of ``(time, priority, seq, event)`` so that events
at the same instant run in priority order and then in scheduling order, which makes every run
deterministic. Cancellation is lazy (a cancelled event stays in the heap and is skipped) because
re-heapifying on every cancel would cost O(n) and the cluster model re-plans completions often.
A fair-share re-plan asked for at the current instant (``defer``) bypasses the heap when nothing
else is due at that instant, which in the task model is after nearly every task end; it runs where
the heap would have run it and counts as an event all the same.
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
        self._deferred: list[tuple[float, int, int, Event]] = []
        self.processed = 0

    @property
    def now(self) -> float:
        """The simulated time of the event being processed (or of the last one)."""
        return self._now

    def schedule(self, at: float, action: Callable[[], None], priority: int = 1) -> Event:
        """Run ``action`` at absolute time ``at`` (never earlier than ``now``)."""
        when = at
        if not when > self._now:  # now or earlier (runs now), or NaN (refused)
            if math.isnan(when):
                raise ValueError("event time is NaN")
            when = self._now
        seq = next(self._seq)
        event = Event(when, priority, seq, action)
        heapq.heappush(self._heap, (when, priority, seq, event))
        return event

    def defer(self, action: Callable[[], None], priority: int) -> Event:
        """``schedule(now, action, priority)``, for an event that must follow every event due
        at this instant before it (a fair-share re-plan after all of an instant's completions).

        It enters the heap only if the running event leaves another one due now; otherwise
        nothing else can run before it and ``step`` runs it straight after the running event.
        A simulation with one per task end (the task model) saves a heap push and pop each.
        """
        event = Event(self._now, priority, next(self._seq), action)
        self._deferred.append((self._now, priority, event.seq, event))
        return event

    def _flush(self) -> None:
        # Into the heap: deferred from outside a step (a cluster driven directly, as tests do),
        # or several deferred by one event.
        for entry in self._deferred:
            heapq.heappush(self._heap, entry)
        self._deferred.clear()

    def peek(self) -> float:
        """Time of the next live event, or ``inf`` when nothing is pending."""
        if self._deferred:
            self._flush()
        heap = self._heap
        while heap and heap[0][3].cancelled:
            heapq.heappop(heap)
        return heap[0][0] if heap else math.inf

    def step(self) -> bool:
        """Run the next live event; False when the heap is empty."""
        if self._deferred:
            self._flush()
        heap = self._heap
        while heap:
            when, _, _, event = heapq.heappop(heap)
            if event.cancelled:
                continue
            self._now = when
            self.processed += 1
            event.action()
            deferred = self._deferred
            while deferred:
                # Events order by (time, priority, seq), so when an entry joins the heap does
                # not change when it runs; one with nothing else due now can run at once.
                if len(deferred) == 1 and (not heap or heap[0][0] > when):
                    entry = deferred.pop()[3]
                    if not entry.cancelled:
                        self.processed += 1
                        entry.action()
                    continue
                self._flush()
            return True
        return False

    def run(self, until: float | None = None) -> None:
        """Process events up to and including time ``until`` (all of them when None).

        With ``until`` the clock ends at ``until`` even if the last event came earlier, like
        SimPy's ``run(until=...)``.
        """
        if until is None:
            while self.step():
                pass
            return
        limit = until
        while True:
            nxt = self.peek()
            if nxt == math.inf or nxt > limit:
                break
            self.step()
        if until > self._now:
            self._now = until
