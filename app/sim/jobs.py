"""Jobs as the simulator sees them (thesis seed 004, sections 4.1.1 and 5.1.1).

A job is what PYTHIA and Justice know about it: ``requestedTasks`` (its maximum parallelism, one
vcore per task), ``compTime`` (total vcore-seconds across tasks) and, once synthesised, a deadline
relative to its submission. The simulator assumes perfect parallelism like the thesis: a job given
``c`` vcores progresses ``c`` vcore-seconds per second, so its ideal runtime on a cluster of
``capacity`` vcores is ``compTime / min(requestedTasks, capacity)``.

Bounds (``SimJob`` refuses anything outside them, so a bad trace row is an error rather than a
run that never ends: the simulator samples every 60 simulated seconds until the last job ends):
times are finite; a submission lies within ``MAX_SUBMIT_S`` (100 years) of 0, so seconds since the
Unix epoch still fit; a job's ideal run at its own parallelism, ``work / tasks``, is at most
``MAX_RUN_S`` (10 years; the public traces' longest is 29 days) and it has at most ``MAX_TASKS``
tasks (the public traces' largest has 112,523). A whole run has its own bound, on the cluster it
runs on (``experiment.check_length``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from enum import Enum
from typing import NamedTuple

YEAR_S = 365.25 * 86400
MAX_SUBMIT_S = 100 * YEAR_S
MAX_RUN_S = 10 * YEAR_S
MAX_TASKS = 10_000_000


class JobError(ValueError):
    """A job's field is out of bounds; ``field`` is ``SimJob``'s name for it, so a trace loader
    can name its own column instead."""

    def __init__(self, job_id: str, field: str, problem: str) -> None:
        super().__init__(f"job {job_id}: {field}: {problem}")
        self.field = field
        self.problem = problem


def years(seconds: float) -> str:
    """``seconds`` for a message about the bounds, in years."""
    return f"{seconds / YEAR_S:.3g} years"


@dataclass(frozen=True, slots=True)
class SimJob:
    """One job of a workload trace (immutable input of a run)."""

    job_id: str
    submit_s: float
    tasks: int
    work: float
    queue: str = "default"
    user: str = ""
    input_bytes: float = 0.0
    runtime_s: float | None = None
    deadline_s: float | None = None
    name: str = ""  # application name where the workload has one (recurring-job signatures)

    def __post_init__(self) -> None:
        def bad(field: str, problem: str) -> JobError:
            return JobError(self.job_id, field, problem)

        if not abs(self.submit_s) <= MAX_SUBMIT_S:
            raise bad("submit_s", f"{self.submit_s!r} is not within {years(MAX_SUBMIT_S)} of 0")
        if not 1 <= self.tasks <= MAX_TASKS:
            raise bad("tasks", f"must be from 1 to {MAX_TASKS:,}, got {self.tasks}")
        if not self.work > 0 or not math.isfinite(self.work):
            raise bad("work", f"must be a finite number > 0, got {self.work!r}")
        if not self.work / self.tasks <= MAX_RUN_S:
            raise bad(
                "work",
                f"{self.work:g} vcore-s over {self.tasks} task(s) is an ideal run of "
                f"{years(self.work / self.tasks)}, over the limit of {years(MAX_RUN_S)}",
            )
        if not 0 <= self.input_bytes < math.inf:
            raise bad("input_bytes", f"must be a finite number >= 0, got {self.input_bytes!r}")
        for field, value in (("runtime_s", self.runtime_s), ("deadline_s", self.deadline_s)):
            if value is not None and not math.isfinite(value):
                raise bad(field, f"must be finite, got {value!r}")

    def max_cpus(self, capacity: int) -> int:
        """``maxCPUs = min(requestedTasks, capacity)`` (Algorithm 3, line 3)."""
        return min(self.tasks, capacity)

    def ideal_runtime(self, capacity: int) -> float:
        """Runtime with ``maxCPUs`` vcores from submission on an empty cluster."""
        return self.work / self.max_cpus(capacity)

    def with_deadline(self, deadline_s: float) -> SimJob:
        """A copy carrying ``deadline_s`` (seconds after submission)."""
        return replace(self, deadline_s=deadline_s)


class Status(Enum):
    """Where a job is in its life; the last four are final."""

    PENDING = "pending"  # submitted, held by an admission allocator
    RUNNING = "running"
    SUCCEEDED = "succeeded"  # finished by its deadline (or had none)
    MISSED = "missed"  # finished after its deadline
    KILLED = "killed"  # terminated while running
    DROPPED = "dropped"  # refused before it ever ran


FINAL = frozenset({Status.SUCCEEDED, Status.MISSED, Status.KILLED, Status.DROPPED})


@dataclass(eq=False, slots=True)
class JobRun:
    """Mutable per-run state of one job; owned by the runner, updated by the cluster."""

    job: SimJob
    max_cpus: int
    status: Status = Status.PENDING
    start_s: float | None = None
    end_s: float | None = None
    consumed: float = 0.0  # vcore-seconds actually received
    grant: int = 0  # fixed vcores of an admission allocator, 0 under fair share
    reason: str = ""
    waited_for: str = ""  # why an admission allocator last queued it (its last "queue" reason)
    arrival: int = 0  # position in the run's arrival order (the runner numbers its jobs)

    @property
    def deadline_at(self) -> float:
        """Absolute deadline; ``inf`` when the job has none."""
        d = self.job.deadline_s
        return float("inf") if d is None else self.job.submit_s + d


class Decided(NamedTuple):
    """One admission decision about one job, as a run's decision log keeps it
    (``yarn-sidecar simulate --decisions``): when, what, on how many vcores, and why."""

    at_s: float
    job_id: str
    action: str  # admit, queue, drop or kill
    vcores: int
    reason: str


_NUMBER = re.compile(r"\d+(\.\d+)?")


def reason_shape(reason: str) -> str:
    """``reason`` with its numbers left out: what stays the same while a queued job waits for
    the same thing round after round (``expects 12 vcores at now+3.0s``, then ``now+2.1s``)."""
    return _NUMBER.sub("N", reason)
