"""A running job's first wave, timed from the RM's container list: the observation behind
Promise's first-wave rule (``app.policies.promise.core``, "First wave").

The rule needs a lower bound of how long the job's tasks take: how long its first tasks have run
without one ending. The RM lists an application attempt's live containers with their elapsed
time by its own clock (``RMClient.attempt_containers``). That times tasks only when each task
runs in a container of its own that ends with it (MapReduce, Tez without container reuse), so a
job's run must say so (``task_containers``): a Spark executor or the built-in ``sleep`` template
runs many tasks, or all of its waves, in one long container, whose age says nothing about a task.

While none of the attempt's task containers has ended, the youngest one's age is a time every
task started so far has run without ending. A container that has ended is no longer listed;
container numbers of an attempt are consecutive from its ApplicationMaster's, so a number
missing below the highest means one ended, and from then on the bound stays where it was (the
caller keeps the largest bound seen, and need not read the job's containers again: a missing
number never comes back). Pure: no I/O.
"""

from __future__ import annotations

from typing import NamedTuple

from app.domain.model import AttemptContainers


def _number(container_id: str) -> tuple[str, int] | None:
    """``container_[e<epoch>_]<cluster ts>_<app>_<attempt>_<n>`` -> (everything before ``n``,
    ``n``); None for any other form."""
    prefix, _, tail = container_id.rpartition("_")
    if not prefix.startswith("container_") or not tail.isdigit():
        return None
    return prefix, int(tail)


class Timing(NamedTuple):
    """What one reading of an attempt's containers says of its first wave."""

    floor_s: float | None  # seconds every task has run while none has ended; None: no bound
    ended: bool  # a task container has ended: no later reading of this attempt gives a bound


def time_first_wave(attempt: AttemptContainers) -> Timing:
    """The bound of ``attempt``'s first wave (module docstring): none when a task has ended,
    none has started, or an id is not one this reads."""
    am = _number(attempt.am_container_id)
    if am is None:
        return Timing(None, False)
    ages: list[int] = []
    highest = am[1]
    for c in attempt.containers:
        if c.container_id == attempt.am_container_id:
            continue
        number = _number(c.container_id)
        if number is None or number[0] != am[0]:
            return Timing(None, False)
        highest = max(highest, number[1])
        ages.append(c.elapsed_ms)
    if highest - am[1] > len(ages):
        return Timing(None, True)
    if not ages:
        return Timing(None, False)
    return Timing(min(ages) / 1000, False)
