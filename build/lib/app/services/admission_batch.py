"""Coalesced admission of concurrent ``POST /jobs`` (group commit), with load shedding.

An admission round reads every waiting and running job, so one round per request makes intake
fall as the queue grows, and requests serialised behind one lock each wait for all rounds ahead
of them. Here a request only enqueues its job and competes for the admission lock; whoever holds
it takes every pending request (up to ``MAX_BATCH``) and stores them and their first decisions
in ONE transaction with one round. Each job is still committed before its request returns.

Deadlock freedom: a waiting request holds no database connection (it waits on the lock alone);
only the lock holder takes one. A request that cannot be served within ``wait_s`` is withdrawn
and refused with ``Overloaded`` (the API answers 503 with ``Retry-After``) rather than queueing
threads without bound; a request already taken into a running batch always gets its answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

# Enough to drain a burst in a few rounds; bounded so one transaction stays short.
MAX_BATCH = 256
# How long a request may wait for its turn (from its arrival) before it is shed.
ADMIT_WAIT_S = 10.0

_In = TypeVar("_In")
_Out = TypeVar("_Out")


class Overloaded(Exception):
    """The admission lock stayed busy for the whole wait: the caller should retry later."""


@dataclass(eq=False)
class _Ticket(Generic[_In, _Out]):
    item: _In
    now_ms: int
    done: threading.Event = field(default_factory=threading.Event)
    taken: bool = False
    result: _Out | None = None
    error: BaseException | None = None


class SubmissionBatcher(Generic[_In, _Out]):
    """Runs ``run_batch`` under ``lock`` for all requests waiting at the time.

    ``run_batch`` gets (item, now_ms) pairs and returns, per pair and in order, the result or the
    exception that request must raise (the others in the batch still succeed).
    """

    def __init__(
        self,
        lock: threading.Lock,
        run_batch: Callable[[Sequence[tuple[_In, int]]], list[_Out | BaseException]],
        *,
        wait_s: float = ADMIT_WAIT_S,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self.lock = lock
        self.run_batch = run_batch
        self.wait_s = wait_s
        self.max_batch = max_batch
        self._guard = threading.Lock()
        self._pending: list[_Ticket[_In, _Out]] = []
        self.batches = 0
        self.largest_batch = 0

    def submit(self, item: _In, now_ms: int, *, arrived: float | None = None) -> _Out:
        """Store ``item`` through a batch and return its result; ``Overloaded`` if not served
        within ``wait_s`` of ``arrived`` (``time.monotonic()``; time spent waiting for a worker
        thread counts too)."""
        ticket: _Ticket[_In, _Out] = _Ticket(item, now_ms)
        with self._guard:
            self._pending.append(ticket)
        deadline = (time.monotonic() if arrived is None else arrived) + self.wait_s
        while not ticket.done.is_set():
            remaining = deadline - time.monotonic()
            if remaining > 0 and self.lock.acquire(timeout=remaining):
                try:
                    # A batch that took this ticket ran under the lock: it is answered by now.
                    if not ticket.done.is_set():
                        self._drain()
                finally:
                    self.lock.release()
                continue
            with self._guard:
                if not ticket.taken:
                    self._pending.remove(ticket)
                    raise Overloaded("admission is saturated; retry shortly")
            ticket.done.wait()
        if ticket.error is not None:
            raise ticket.error
        assert ticket.result is not None
        return ticket.result

    def _drain(self) -> None:
        """Run one batch of the oldest pending requests (the caller holds ``lock``)."""
        with self._guard:
            batch = self._pending[: self.max_batch]
            del self._pending[: self.max_batch]
            for ticket in batch:
                ticket.taken = True
        if not batch:
            return
        self.batches += 1
        self.largest_batch = max(self.largest_batch, len(batch))
        try:
            outcomes = self.run_batch([(t.item, t.now_ms) for t in batch])
            for ticket, outcome in zip(batch, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    ticket.error = outcome
                else:
                    ticket.result = outcome
        except Exception as exc:
            # The transaction rolled back: every request of the batch fails with its error.
            for ticket in batch:
                ticket.error = exc
        finally:
            for ticket in batch:
                ticket.done.set()
