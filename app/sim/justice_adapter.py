"""PYTHIA, Justice and the Oracle as simulator allocators over ``app.policies.justice``
(thesis seed 004, Algorithms 1 to 6 and section 5.2; ``docs/policies.md``, "PYTHIA and Justice").

The adapter owns no policy arithmetic: on every submission and every completion it hands the
waiting jobs, the killable running jobs and the free vcores to ``justice.admit`` (or
``justice.oracle_admit``) and applies the decisions it returns: ``admit`` starts the job on a
fixed grant, ``drop`` refuses it, ``kill`` terminates it, ``queue`` leaves it waiting. Completed
jobs (not killed ones, which did not complete) are fed to ``justice.track_job`` with
``compTime = work`` and ``numCPUsAllocd`` = the grant, as the live sidecar feeds it the RM's
``vcoreSeconds``.

Only running jobs with ``requestedTasks > drop_threshold`` are passed as ``running``: the kill rule
can never select the others, so the decisions are the same and the call stays O(waiting + large).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from app.policies.justice import core as justice
from app.policies.justice.admission import JusticeAdmission
from app.sim.cluster import PRIORITY_REPLAN
from app.sim.jobs import Decided, JobRun, Status, reason_shape
from app.sim.runner import SimContext

# After arrivals and completions at an instant, with the fair-share replan.
PRIORITY_ADMISSION = PRIORITY_REPLAN


class _Admission:
    """Shared bookkeeping: waiting list, killable running jobs, decision counts."""

    name = "admission"

    def __init__(self) -> None:
        self.ctx: SimContext | None = None
        self._waiting: dict[str, JobRun] = {}
        self._specs: dict[str, justice.Job] = {}
        self._running: dict[str, JobRun] = {}
        self.decisions: dict[str, int] = {"admit": 0, "queue": 0, "drop": 0, "kill": 0}
        self._admitting = False
        self._again = False
        self._pass_pending = False
        self._log: list[Decided] | None = None
        self._waits: dict[str, str] = {}  # a queued job's last logged reason (its shape)

    def record_decisions(self) -> list[Decided]:
        """Keep from now on a log of the decisions this allocator makes (the list returned,
        filled as the run goes): each job's admission, drop or kill, and each new reason it is
        queued for; a queued job waiting for the same thing again (``reason_shape``) is not
        logged again, so the log stays a few lines per job however many rounds it waits."""
        self._log = []
        return self._log

    def bind(self, ctx: SimContext) -> None:
        """Keep the context."""
        self.ctx = ctx

    def pending(self) -> Iterable[JobRun]:
        """Jobs waiting for an offer."""
        return tuple(self._waiting.values())

    def submit(self, run: JobRun) -> None:
        """Queue the job and run admission (Algorithm 6 runs on every submission)."""
        job = run.job
        if job.deadline_s is None:
            raise ValueError(f"{self.name} needs deadlines; job {job.job_id} has none")
        self._waiting[job.job_id] = run
        self._specs[job.job_id] = justice.Job(job.job_id, job.tasks, job.deadline_s, job.submit_s)
        self._request()

    def ended(self, run: JobRun) -> None:
        """Learn from a completion, then run admission again."""
        self._running.pop(run.job.job_id, None)
        if run.status in (Status.SUCCEEDED, Status.MISSED):
            self._track(run)
        self._request()

    def _request(self) -> None:
        """One admission pass per instant, after every arrival and completion at that instant.

        Algorithm 6 runs "on every submission and completion"; events at the same simulated
        instant are one scheduling event here (the trace's 3,986 jobs at t = 0 of the 29-day
        file would otherwise cost 3,986 passes over a growing queue).
        """
        assert self.ctx is not None
        if not self._pass_pending:
            self._pass_pending = True
            self.ctx.engine.schedule(self.ctx.now, self._pass, PRIORITY_ADMISSION)

    def _pass(self) -> None:
        self._pass_pending = False
        self._admit()

    def _track(self, run: JobRun) -> None:
        """Feed a completion to the estimator (nothing to learn for the Oracle)."""

    def _decide(self, free: int, now: float) -> list[justice.Decision]:
        raise NotImplementedError

    def _admit(self) -> None:
        # A kill ends a job, which calls ``ended`` and so ``_admit`` again from inside the loop
        # below; that nested call only asks for one more round once this one is applied.
        if self._admitting:
            self._again = True
            return
        assert self.ctx is not None
        self._admitting = True
        try:
            self._again = True
            while self._again:
                self._again = False
                for d in self._decide(self.ctx.cluster.free, self.ctx.now):
                    self.decisions[d.action] += 1
                    if self._log is not None:
                        self._record(d, self._log)
                    self._apply(d)
        finally:
            self._admitting = False

    def _record(self, d: justice.Decision, log: list[Decided]) -> None:
        assert self.ctx is not None
        if d.action == "queue":
            shape = reason_shape(d.reason)
            if self._waits.get(d.job_id) == shape:
                return
            self._waits[d.job_id] = shape
        else:  # the job leaves the queue (admitted or dropped) or is killed
            self._waits.pop(d.job_id, None)
        log.append(Decided(self.ctx.now, d.job_id, d.action, d.cpus, d.reason))

    def _apply(self, d: justice.Decision) -> None:
        assert self.ctx is not None
        ctx = self.ctx
        if d.action == "admit":
            run = self._waiting.pop(d.job_id)
            del self._specs[d.job_id]
            ctx.cluster.start_fixed(run, d.cpus)
            if self._killable(run):
                self._running[d.job_id] = run
        elif d.action == "drop":
            run = self._waiting.pop(d.job_id)
            del self._specs[d.job_id]
            ctx.drop(run, d.reason)
        elif d.action == "queue":
            self._waiting[d.job_id].waited_for = d.reason
        elif d.action == "kill":
            # Kills come first in ``admit``'s list, so the vcores they free are back before the
            # offers of the same call are applied.
            ctx.cluster.kill(self._running.pop(d.job_id), d.reason)

    def _killable(self, run: JobRun) -> bool:
        return False

    def _running_specs(self) -> list[justice.RunningJob]:
        return [
            justice.RunningJob(
                r.job.job_id, r.job.tasks, r.job.deadline_s or 0.0, r.job.submit_s, r.grant
            )
            for r in self._running.values()
        ]


class JusticeAllocator(_Admission):
    """Justice (``variant="justice"``) or PYTHIA (``variant="pythia"``)."""

    def __init__(self, variant: str = "justice", params: Mapping[str, Any] | None = None):
        super().__init__()
        self.name = variant
        self.policy = JusticeAdmission(justice.make_params(variant, params))
        self.params = self.policy.justice
        self.state = justice.EstimatorState()

    def _decide(self, free: int, now: float) -> list[justice.Decision]:
        assert self.ctx is not None
        return self.policy.admit(
            list(self._specs.values()),
            self._running_specs(),
            free,
            self.ctx.cluster.capacity,
            now,
            self.state,
        )

    def _killable(self, run: JobRun) -> bool:
        return run.job.tasks > self.params.drop_threshold

    def _track(self, run: JobRun) -> None:
        assert self.ctx is not None and run.job.deadline_s is not None
        outcome = justice.JobOutcome(
            run.job.job_id,
            run.job.tasks,
            run.job.deadline_s,
            run.job.work,
            run.grant,
            run.status is Status.SUCCEEDED,
        )
        self.state = self.policy.learn(self.state, outcome, self.ctx.cluster.capacity)


class OracleAllocator(_Admission):
    """The Oracle of section 5.2 through ``justice.oracle_admit`` (exact ``compTime``)."""

    name = "oracle"

    def _decide(self, free: int, now: float) -> list[justice.Decision]:
        assert self.ctx is not None
        comp = {job_id: run.job.work for job_id, run in self._waiting.items()}
        return justice.oracle_admit(
            list(self._specs.values()), comp, free, self.ctx.cluster.capacity, now
        )
