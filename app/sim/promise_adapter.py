"""The Promise admission policy (``app/policies/promise``) as a simulator allocator.

Like ``justice_adapter``: on every arrival and completion instant it hands the waiting jobs, the
running admitted jobs and the free vcores to ``promise.core.admit`` and applies the decisions;
completed runs (succeeded or missed) are learned by the estimator with ``work`` as the RM's
``vcoreSeconds``. Killed runs teach nothing (their work is censored).

A simulated job's signature is its normalised name with user and queue where the workload has
names (``recurring``); the traces carry none, so there it is the queue, user and the power-of-two
class of the task count (``signature.size_class``). Fallback keys: the user, the queue, global.
Arrivals feed ``core.LoadMeter`` with their estimated work, slack and need (``arrive_job``).
A running job's progress shows when it ends ``PromiseParams.progress_s`` after its start, as
the live sidecar's readings of the RM's app progress would (``_progress_end``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from app.policies.justice import core as justice
from app.policies.promise import core, grants
from app.policies.promise.admission import PromiseAdmission
from app.policies.promise.estimator import Estimator, Outcome, params_from
from app.policies.promise.model import progress_end
from app.policies.promise.signature import Keys, normalise_name, size_class
from app.sim.jobs import JobRun, SimJob, Status
from app.sim.justice_adapter import PRIORITY_ADMISSION, _Admission
from app.sim.runner import SimContext
from app.sim.tasks import task_seconds


def sim_keys(job: SimJob) -> Keys:
    """The simulator's signature rule (module docstring)."""
    user = f"u:{job.user}|q:{job.queue}"
    if job.name:
        return Keys(f"n:{normalise_name(job.name)}|{user}", user, f"q:{job.queue}")
    return Keys(f"{user}|c:{size_class(job.tasks)}", user, f"q:{job.queue}")


class PromiseAllocator(_Admission):
    """``promise`` in ``simulate`` and ``simulate compare``."""

    name = "promise"

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        values = core.make_params(params)
        self.policy = PromiseAdmission(values)
        self.params = self.policy.planner
        self.estimator = Estimator(params_from(values))
        self._keys: dict[str, Keys] = {}
        # What a round reads of each job that does not change while it waits, or once its
        # first wave's tasks have run their whole duration (every round rebuilt them before).
        self._as_waiting: dict[str, core.WaitingJob] = {}
        self._as_running: dict[str, core.RunningJob] = {}
        self.decisions["keep"] = 0
        self.meter = core.LoadMeter()
        self._wake = math.inf

    def bind(self, ctx: SimContext) -> None:
        """Keep the context, and plan as the cluster runs a grant: in waves of whole tasks
        (task model) or as divisible work (fluid model; ``PromiseParams.divisible``)."""
        super().bind(ctx)
        self.params = dataclasses.replace(self.params, divisible=ctx.cluster.divisible)
        self.policy.planner = self.params

    def submit(self, run: JobRun) -> None:
        """Remember the job's keys, then queue it as the Justice adapter does."""
        job = run.job
        keys = sim_keys(job)
        self._keys[job.job_id] = keys
        self._as_waiting[job.job_id] = core.WaitingJob(
            job.job_id, job.tasks, job.deadline_s or 0.0, job.submit_s, keys
        )
        assert self.ctx is not None
        if job.deadline_s is not None:
            est = self.estimator.estimate(keys, job.tasks, job.deadline_s, run.max_cpus)
            cap = self.ctx.cluster.capacity
            self.meter.arrive_job(
                self.ctx.now, est, job.tasks, job.deadline_s, cap, self.params.divisible
            )
        super().submit(run)

    def _killable(self, run: JobRun) -> bool:
        return True

    def _track(self, run: JobRun) -> None:
        assert self.ctx is not None
        job = run.job
        outcome = Outcome(self._keys[job.job_id], job.tasks, job.work, job.deadline_s, run.max_cpus)
        self.estimator = self.policy.learn(self.estimator, outcome, self.ctx.cluster.capacity)

    def ended(self, run: JobRun) -> None:
        """Learn (via ``_track``; a killed run as the least work it showed), forget the keys,
        run admission again."""
        if run.status is Status.KILLED and run.start_s is not None and self.ctx is not None:
            # what the sidecar saw: its tasks' work so far, and its first wave's tasks running
            # that long without ending (tasks alike, each at least that long)
            floor = self._running_job(run, self.ctx.now).task_floor_s
            work = max(run.consumed, floor * run.job.tasks)
            if work > 0:
                outcome = Outcome(
                    self._keys[run.job.job_id],
                    run.job.tasks,
                    work,
                    run.job.deadline_s,
                    run.max_cpus,
                    censored=True,
                )
                self.estimator = self.policy.learn(
                    self.estimator, outcome, self.ctx.cluster.capacity
                )
        super().ended(run)
        self._keys.pop(run.job.job_id, None)
        self._as_running.pop(run.job.job_id, None)

    def _decide(self, free: int, now: float) -> list[justice.Decision]:
        assert self.ctx is not None
        waiting = [self._as_waiting[job_id] for job_id in self._waiting]
        running = [self._running_job(r, now) for r in self._running.values()]
        out: list[justice.Decision] = []
        cap = self.ctx.cluster.capacity
        load = self.meter.load(now)
        wake = math.inf
        for d in self.policy.admit(waiting, running, free, cap, now, self.estimator, load=load):
            if d.action == "queue" and d.latest_start_s is not None:
                wake = min(wake, d.latest_start_s)
            if d.action == "keep":
                self.decisions["keep"] += 1
                continue
            out.append(justice.Decision(d.action, d.job_id, d.cpus, d.reason))
        self._wake_at(wake)
        return out

    def _running_job(self, r: JobRun, now: float) -> core.RunningJob:
        """What the sidecar knows of a running job, its first wave's tasks included: how long
        they have run, up to a task's duration (its work per task: in the fluid model a grant
        runs its tasks' work back to back, ``tasks / grant`` of them per vcore), and once its
        progress shows it, when it ends (``_progress_end``)."""
        assert self.ctx is not None
        job_id = r.job.job_id
        start = r.start_s if r.start_s is not None else now
        progress_end = self._progress_end(r, start, now)
        known = self._as_running.get(job_id)
        if known is not None and known.progress_end_s == progress_end:
            return known
        task_s = task_seconds(r)
        spec = core.RunningJob(
            job_id,
            r.job.tasks,
            r.job.deadline_s or 0.0,
            r.job.submit_s,
            start,
            r.grant,
            self._keys[job_id],
            min(now - start, task_s),
            progress_end,
        )
        if now - start >= task_s:
            self._as_running[job_id] = spec
        return spec

    def _progress_end(self, r: JobRun, start: float, now: float) -> float:
        """When its progress says ``r`` ends, once ``PromiseParams.progress_s`` after its start
        (0 before). Its progress is its work done as MapReduce counts it, finished tasks and
        the running ones' share of theirs: on a fixed grant it rises at the grant's width over
        its work from its start, so it projects ``start + work / width``, its end in the fluid
        model; in the task model a last wave narrower than the grant ends later than that, and
        a miss only that wave causes shows only at the deadline."""
        seen = self.params.progress_s
        if seen <= 0 or now - start < seen - 1e-9 or r.job.work <= 0:
            return 0.0
        done = min(1.0, min(r.grant, r.job.tasks) * (now - start) / r.job.work)
        return progress_end(0.0, start, done, now)

    def _apply(self, d: justice.Decision) -> None:
        """Apply, and for an admitted job that will miss, run a round when its progress shows
        it (``PromiseParams.progress_s`` after its start) and, for a job of several waves, when
        its first wave's tasks have run long enough to show it (``core.first_wave_verdict_s``),
        as the sidecar's next poll after that moment would. Other rounds stay as they were: at
        the next arrival or completion."""
        super()._apply(d)
        if d.action in ("admit", "drop"):
            del self._as_waiting[d.job_id]
        elif d.action == "kill":
            self._as_running.pop(d.job_id, None)
        if d.action != "admit":
            return
        assert self.ctx is not None
        ctx = self.ctx
        run = self._running[d.job_id]
        div = self.params.divisible
        seen = ctx.now + self.params.progress_s
        if self._progress_end(run, ctx.now, seen) > run.deadline_at:
            ctx.engine.schedule(seen + 1e-6, self._request, PRIORITY_ADMISSION)
        n_waves = grants.waves(run.job.tasks, run.grant, div)
        if n_waves > 1 and ctx.now + n_waves * task_seconds(run) > run.deadline_at:
            at = core.first_wave_verdict_s(self._running_job(run, ctx.now), div)
            ctx.engine.schedule(max(at, ctx.now) + 1e-6, self._request, PRIORITY_ADMISSION)

    def _wake_at(self, at: float) -> None:
        """Run admission again when a queued job's latest start passes: no arrival or
        completion may come before then, and the job must be dropped, not left waiting."""
        assert self.ctx is not None
        if not math.isfinite(at) or at >= self._wake:
            return
        self._wake = at
        when = max(at, self.ctx.now) + 1e-6

        def wake() -> None:
            if self._wake == at:
                self._wake = math.inf
            self._request()

        self.ctx.engine.schedule(when, wake, PRIORITY_ADMISSION)
