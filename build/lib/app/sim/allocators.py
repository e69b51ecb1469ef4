"""Job allocators of the Justice evaluation (thesis seed 004, sections 4.2 and 5.2).

* ``baseline-fs`` (the thesis' Baseline FS, chapter 4's NoDrop FS): YARN/Mesos fair share without
  admission control; every job runs at once and is never dropped.
* ``reactive-fs``: Baseline FS plus termination of any job still running at its deadline.

The Oracle, PYTHIA and Justice are not implemented here: they are adapters over
``app.policies.justice`` (``app/sim/justice_adapter.py``), so the simulator runs the sidecar's
own policy code. Running fair share over time (re-sharing on every arrival and completion) is
the cluster's job (``app/sim/cluster.py``); the kill of Reactive FS is a timer at the deadline,
which is when ``justice.reactive_kills`` would first select the job. The timer is cancelled when
its job ends first: a stale timer would keep the event loop alive to the latest deadline and
stretch the makespan (and shrink utilization) past the last job's end.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from app.sim.engine import PRIORITY_CONTROL, Event
from app.sim.jobs import JobRun, Status
from app.sim.runner import Allocator, SimContext


class BaselineFS:
    """Fair share, no admission control, no dropping."""

    name = "baseline-fs"

    def __init__(self) -> None:
        self.ctx: SimContext | None = None

    def bind(self, ctx: SimContext) -> None:
        """Keep the context."""
        self.ctx = ctx

    def submit(self, run: JobRun) -> None:
        """Start every job immediately under fair share."""
        assert self.ctx is not None
        self.ctx.cluster.start_fair(run)

    def ended(self, run: JobRun) -> None:
        """Nothing to learn from completions."""

    def pending(self) -> Iterable[JobRun]:
        """Nothing is ever held back."""
        return ()


class ReactiveFS(BaselineFS):
    """Baseline FS that kills a job the moment its deadline passes."""

    name = "reactive-fs"

    def __init__(self) -> None:
        super().__init__()
        self._timers: dict[int, Event] = {}

    def submit(self, run: JobRun) -> None:
        """Start under fair share and arm a kill at the deadline."""
        super().submit(run)
        assert self.ctx is not None
        ctx = self.ctx
        if math.isfinite(run.deadline_at):
            # Completion events run before control events at the same instant, so a job that
            # finishes exactly at its deadline counts as a success.
            self._timers[id(run)] = ctx.engine.schedule(
                run.deadline_at, _killer(ctx, run), PRIORITY_CONTROL
            )

    def ended(self, run: JobRun) -> None:
        """Cancel the job's kill timer: nothing is left to kill."""
        timer = self._timers.pop(id(run), None)
        if timer is not None:
            timer.cancel()


def _killer(ctx: SimContext, run: JobRun) -> Callable[[], None]:
    def kill() -> None:
        if run.status is Status.RUNNING:
            ctx.cluster.kill(run, "deadline passed")

    return kill


BASELINES: dict[str, Callable[[], Allocator]] = {
    BaselineFS.name: BaselineFS,
    ReactiveFS.name: ReactiveFS,
}
