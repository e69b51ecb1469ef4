"""Fawkes' DD, TT and JS inputs from the MapReduce history (seed ``000``, section 4.2: "waiting
input data", "task throughput", "job slowdown"), which the RM's REST API does not report.

Pure: the service layer reads the apps and the profile book (``app.policies.hybridmr.profiles``)
and hands them here; the result fills ``QueueInputs`` of the live observation view.

Decisions where the paper is silent about a live cluster:

* ``waiting_input_bytes``: a waiting job has not read its input yet, so its size is the mean
  input of its signature's past runs (the fallback chain: signature, user and type, queue, all);
  a job with no such history adds nothing.
* ``completed_tasks``: the tasks of the jobs whose history was stored since the last recorded
  tick (the JobHistory server knows a job once it finished; the service layer keeps the cursor),
  so each job's tasks count exactly once, in the first tick that can see them.
* ``slowdowns``: each running job's time so far over its profile's expected total (the median
  total of the most specific level of its chain), so a job running longer than its history says
  raises its queue's weight; a job without a profile adds nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from app.policies.hybridmr.profiles import ProfileBook

# The observation-view fields this module fills (``control.config.check_observable``).
FIELDS: frozenset[str] = frozenset({"waiting_input_bytes", "completed_tasks", "slowdowns"})


@dataclass(frozen=True, slots=True)
class LiveApp:
    """A waiting or running application of a managed queue."""

    queue: str
    chain: tuple[str, ...]
    started_ms: int | None = None


@dataclass(slots=True)
class HistoryInputs:
    """The three history-derived numbers of one queue."""

    waiting_input_bytes: float = 0.0
    completed_tasks: float = 0.0
    slowdowns: list[float] = field(default_factory=list)


def history_inputs(
    book: ProfileBook,
    now_ms: int,
    queues: Sequence[str],
    waiting: Iterable[LiveApp],
    running: Iterable[LiveApp],
    completed_tasks: Mapping[str, int],
) -> dict[str, HistoryInputs]:
    """Per managed queue (module docstring)."""
    out = {q: HistoryInputs(completed_tasks=float(completed_tasks.get(q, 0))) for q in queues}
    for app in waiting:
        size = book.expected_input_bytes(app.chain)
        if app.queue in out and size is not None:
            out[app.queue].waiting_input_bytes += size
    for app in running:
        expected = book.expected_total_s(app.chain)
        if app.queue not in out or expected is None or expected <= 0 or app.started_ms is None:
            continue
        out[app.queue].slowdowns.append(max(0.0, (now_ms - app.started_ms) / 1000) / expected)
    return out
