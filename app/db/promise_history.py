"""Promise's history in SQL: the estimator rebuilt from the learned observations, and the jobs
an admission round plans over (the "job history in SQL for profile estimation" of the mission;
``app/policies/promise``).

Every learned observation (``estimator_observations``: tasks, deadline, ``comp_time`` =
``vcoreSeconds``) is joined with its application row for the signature (name, type, user, queue,
tags), in observation order, so the same database always gives the same estimator: a restart
rebuilds exactly what was there (``load_estimator``). ``EstimatorCache`` keeps the rebuilt
estimator between rounds and only learns the observations added since (incremental update).
``ArrivalMeter`` measures the rate and mean work of the sidecar's own submissions, Promise's
``load`` (crowd-out and the price of a try), as the simulator measures it at each arrival.

What Promise learns is the tasks' work, not the application's: ``vcoreSeconds`` also counts the
ApplicationMaster's container for its whole life, which admission books apart
(``am_containers``) and which, for an app that waited in YARN for its containers, can exceed the
tasks' work many times over (a plain-YARN job with a tight deadline that queued behind a burst
would teach every later job that it needs more than its whole deadline). ``task_work`` takes out
one vcore for the AM's life (YARN's default AM request) where the app's tasks run in their own
containers. A sidecar job's observation also carries its start-up (``overhead_s``: from its
admission to its finish, less its waves on its grant) and the job's own signature keys, so the
estimate for the next run of a job is learned from the runs of the same job as it was submitted.

A sidecar job whose app was killed (its deadline passed, or its first wave showed it would miss)
teaches TRACK_JOB nothing, but Promise learns it as a lower bound of its work (``censored``): the
tasks' work it had used, or its tasks times how long its first wave's tasks had run without
ending (``jobs.task_floor_s``), whichever is larger. Learning only the runs that ended would
keep each signature's largest runs out of its history, since those are the ones killed.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.orm.util import identity_key

from app.db.jobs_models import EstimatorObservation, Job
from app.db.models import Application
from app.domain.model import times_tasks
from app.domain.tags import HOLDING_STATES, QUEUED
from app.policies.base import PolicyError
from app.policies.promise import core, grants
from app.policies.promise.estimator import Estimator, EstimatorParams, Outcome
from app.policies.promise.model import progress_end
from app.policies.promise.signature import Keys, keys_for


def app_keys(app: Application) -> Keys:
    """Signature keys of a finished application."""
    return keys_for(
        name=app.name, app_type=app.app_type, user=app.user, queue=app.queue, tags=app.tag_list
    )


def job_keys(job: Job) -> Keys:
    """Signature keys of a sidecar job (its run spec's user and type when it names them, else the
    user it runs as)."""
    return run_keys(job.name, job.run, job.owner, job.tags, job.queue)


def run_keys(name: str, run: Any, owner: str | None, job_tags: Any, queue: str) -> Keys:
    """``job_keys`` from the job's columns (a round reads them without loading the rows)."""
    run = run or {}
    named = run.get("user") if isinstance(run, dict) else None
    user = str(named or owner or "")  # whom it runs as on YARN, as an app's user is
    kind = str(run.get("type", run.get("kind", ""))) if isinstance(run, dict) else ""
    profile = run.get("profile") if isinstance(run, dict) else None
    tags = [str(tag) for tag in (job_tags or [])]
    return keys_for(
        name=name,
        app_type=kind,
        user=user,
        queue=queue,
        tags=tags,
        profile=str(profile) if profile else None,
    )


# YARN's default ApplicationMaster request (yarn.app.mapreduce.am.resource.cpu-vcores)
AM_VCORES = 1


def task_work(comp_time: float, app: Application, am_vcores: int = AM_VCORES) -> float:
    """Vcore-seconds of the app's tasks: ``comp_time`` less the AM's life (module docstring).
    Unchanged when nothing would be left: an app whose AM did all the work has no task
    containers, and its work is the AM's."""
    own = _tasks_own(comp_time, app, am_vcores)
    return comp_time if own is None else own


def _tasks_own(comp_time: float, app: Application, am_vcores: int) -> float | None:
    """``comp_time`` less the AM's life, None where that is unknown or leaves nothing."""
    if app.launched_ms is None or app.finished_ms is None:
        return None
    rest = comp_time - am_vcores * max(app.finished_ms - app.launched_ms, 0) / 1000
    return rest if rest >= 1.0 else None


def start_up(job: Job, app: Application, tasks: int, work: float) -> float | None:
    """A sidecar job's start-up: admission to finish less its waves on its grant (``None``
    without a grant or an admission time)."""
    if not job.granted_cpus or job.admitted_ms is None or app.finished_ms is None:
        return None
    span = (app.finished_ms - job.admitted_ms) / 1000
    return max(0.0, span - grants.waves(tasks, job.granted_cpus) * work / tasks)


def am_vcores(job: Job | None) -> int:
    """The AM's vcores: what a sidecar job's run asked for, else YARN's default."""
    run = job.run if job is not None else None
    if not isinstance(run, dict):
        return AM_VCORES
    asked = (run.get("resource") or {}).get("vcores") or run.get("vcores")
    return int(asked) if asked else AM_VCORES


_ROWS_PER_BATCH = 1000


def _observations(
    session: Session, after: tuple[int, str] | None, capacity: int
) -> Iterator[tuple[Outcome, tuple[int, str]]]:
    """The learnable observations in observation order, only those past ``after`` (the
    ``(observed_ms, app_id)`` of the last one learned) when given. Streamed a batch of rows at a
    time: a start-up reads the whole history, and holding it all at once took 470 MB at 100,000
    observations."""
    stmt = (
        select(EstimatorObservation, Application, Job)
        .join(Application, Application.app_id == EstimatorObservation.app_id)
        .outerjoin(Job, Job.id == EstimatorObservation.job_id)
        .where(or_(EstimatorObservation.learned.is_(True), EstimatorObservation.censored.is_(True)))
        .order_by(EstimatorObservation.observed_ms, EstimatorObservation.app_id)
    )
    if after is not None:
        # (observed_ms, app_id) > after, in the database: a refresh reads only the rows added
        # since, from ix_estimator_observations_observed (a range on its column), whatever the
        # history's size. The ORDER BY compares app ids in the same collation, so the rows past
        # the mark are exactly those a full rebuild learns after it.
        observed_ms, app_id = after
        stmt = stmt.where(
            EstimatorObservation.observed_ms >= observed_ms,
            or_(
                EstimatorObservation.observed_ms > observed_ms,
                EstimatorObservation.app_id > app_id,
            ),
        )
    for obs, app, job in session.execute(stmt.execution_options(yield_per=_ROWS_PER_BATCH)):
        mark = (obs.observed_ms, obs.app_id)
        if not obs.tasks or not obs.comp_time or obs.comp_time <= 0:
            continue
        max_cpus = max(1, min(obs.tasks, capacity))
        keys = job_keys(job) if job is not None else app_keys(app)
        if obs.censored:
            # the AM's work is no lower bound of the tasks': without their own, none
            used = _tasks_own(obs.comp_time, app, am_vcores(job)) or 0.0
            shown = obs.tasks * (job.task_floor_s or 0.0) if job is not None else 0.0
            if max(used, shown) <= 0:
                continue
            outcome = Outcome(
                keys, obs.tasks, max(used, shown), obs.deadline_s, max_cpus, censored=True
            )
        else:
            work = task_work(obs.comp_time, app, am_vcores(job))
            overhead = start_up(job, app, obs.tasks, work) if job is not None else None
            outcome = Outcome(keys, obs.tasks, work, obs.deadline_s, max_cpus, overhead)
        yield outcome, mark


def load_estimator(session: Session, params: EstimatorParams, capacity: int) -> Estimator:
    """The estimator rebuilt from every learned observation (``maxCPUs`` capped at
    ``capacity``, as TRACK_JOB caps it)."""
    est = Estimator(params)
    for outcome, _ in _observations(session, None, capacity):
        est.learn(outcome)
    return est


@dataclass(slots=True)
class EstimatorCache:
    """The estimator between rounds; ``refresh`` learns only what was observed since."""

    params: EstimatorParams
    estimator: Estimator | None = None
    mark: tuple[int, str] | None = None
    learned: int = field(default=0)

    capacity: int = 0
    widest: int = 0  # the most tasks of a run learned since the last rebuild
    # False while a read of the whole history has not finished (it failed part way): the next
    # refresh, which would read the rest, counts as such a read too (``rebuilds``).
    complete: bool = False

    def rebuilds(self, capacity: int) -> bool:
        """Whether a refresh at ``capacity`` learns the whole history again, or the rest of one
        that did not finish (``refresh``)."""
        return (
            self.estimator is None
            or not self.complete
            or (capacity != self.capacity and self.widest > min(capacity, self.capacity))
        )

    def refresh(self, session: Session, capacity: int) -> Estimator:
        """Bring the estimator up to date with the database and return it. A run's ``maxCPUs``
        is ``min(tasks, capacity)``, so a new capacity rebuilds it in full only when some run
        learned had more tasks than the old or the new capacity: otherwise every ``maxCPUs``
        is its run's tasks either way. A NodeManager joining or leaving changes the capacity,
        and a rebuild reads the whole history (the admission service does that before a round
        takes the admission lock, ``app.jobs.promise_memory``)."""
        est = self.estimator
        if est is None or self.rebuilds(capacity):
            est = self.estimator = Estimator(self.params)
            self.mark = None
            self.widest = 0
            self.complete = False
        self.capacity = capacity
        for outcome, mark in _observations(session, self.mark, capacity):
            est.learn(outcome)
            self.mark = mark
            self.learned += 1
            self.widest = max(self.widest, outcome.tasks)
        self.complete = True
        return est


# Arrivals older than five time constants weigh under 1 % of a new one (e^-5): not read.
_HORIZON_TAUS = 5.0
# A submission is stamped on arrival and its batch commits within the admission wait (10 s, then
# it is shed), maybe after a round of another process read past its stamp: each refresh re-reads
# the ids stamped this far back and counts those it has not seen.
_LATE_MS = 30_000
_IDS_PER_QUERY = 1000


@dataclass
class ArrivalMeter:
    """The arrival rate of deadline jobs and the work they ask for (``core.LoadMeter``), fed
    from the jobs table: incremental between rounds, rebuilt from the last five time constants
    of submissions after a restart. Each arrival's work is its estimate's central value when the
    meter first reads it (the simulator takes it at the arrival), and its slack and need come
    from the same estimate (``core.LoadMeter.arrive_job``, as in the simulator)."""

    tau_s: float = 3600.0
    meter: core.LoadMeter | None = None
    mark_ms: int = 0
    seen: dict[str, int] = field(default_factory=dict)  # ids counted in the late window
    # The same entries by stamp (a heap, for pruning) and the sum of their stamps: the window's
    # aggregate is compared with them without walking every counted id each round.
    _by_stamp: list[tuple[int, str]] = field(default_factory=list)
    _seen_ms: int = 0

    def refresh(
        self,
        session: Session,
        estimator: Estimator,
        capacity: int,
        now_ms: int,
        fresh: Collection[str] = (),
    ) -> core.Load:
        """Count the submissions not counted yet and return the rates as of ``now_ms``.

        ``fresh``: ids of jobs this transaction has just stored (a submission round's own), the
        likely uncounted ones. The late window is first checked in aggregate (how many jobs it
        holds and the sum of their stamps, one indexed query) against what was counted: when
        the difference is exactly the fresh jobs, they are counted from the session; only
        otherwise (a restart, another replica's submissions, a batch committed late) are the
        window's ids read. Under a burst of 200 submissions a second the window holds about
        6,000 counted jobs, and reading their ids took every round tens of milliseconds."""
        if self.meter is None:
            self.meter = core.LoadMeter(self.tau_s)
            self.mark_ms = now_ms - int(_HORIZON_TAUS * self.tau_s * 1000)
            # the rate is read over the time watched (``core.LoadMeter.watched``): since the
            # first submission ever stored, or all of the window if one is older
            first = session.execute(select(func.min(Job.submitted_ms))).scalar()
            if first is not None:
                self.meter.watch_from(max(int(first), self.mark_ms) / 1000)
        low = self.mark_ms - _LATE_MS
        in_window = Job.submitted_ms >= low, Job.submitted_ms <= now_ms
        total, stamps = session.execute(
            select(func.count(), func.coalesce(func.sum(Job.submitted_ms), 0)).where(*in_window)
        ).one()
        if self.mark_ms <= now_ms:  # every counted stamp is in [low, mark]: all in the window
            counted, counted_ms = len(self.seen), self._seen_ms
        else:  # a round stamped before the latest submission counted
            inside = [v for v in self.seen.values() if v <= now_ms]
            counted, counted_ms = len(inside), sum(inside)
        missing, missing_ms = int(total) - counted, int(stamps) - counted_ms
        if missing == 0 and missing_ms == 0:
            return self.meter.load(now_ms / 1000)
        # From the session's identity map: no statement (``Session.get`` would re-read a row
        # whose server-set columns the insert expired).
        held = (session.identity_map.get(identity_key(Job, job_id)) for job_id in fresh)
        rows = [
            job
            for job in held
            if isinstance(job, Job)
            and job.id not in self.seen
            and low <= job.submitted_ms <= now_ms
        ]
        if len(rows) != missing or sum(job.submitted_ms for job in rows) != missing_ms:
            rows = self._unseen(session, in_window)
        rows.sort(key=lambda j: (j.submitted_ms, j.id))
        for job in rows:
            self._remember(job.id, job.submitted_ms)
            self.mark_ms = max(self.mark_ms, job.submitted_ms)
            n = job.requested_tasks
            try:
                work = estimator.estimate(job_keys(job), n, job.deadline_s, min(n, capacity))
            except PolicyError:
                continue  # nothing to estimate it from: it counts as no arrival
            self.meter.arrive_job(job.submitted_ms / 1000, work, n, job.deadline_s, capacity)
        cutoff = self.mark_ms - _LATE_MS
        while self._by_stamp and self._by_stamp[0][0] < cutoff:
            stamp, job_id = heapq.heappop(self._by_stamp)
            del self.seen[job_id]
            self._seen_ms -= stamp
        return self.meter.load(now_ms / 1000)

    def _remember(self, job_id: str, stamp: int) -> None:
        self.seen[job_id] = stamp
        heapq.heappush(self._by_stamp, (stamp, job_id))
        self._seen_ms += stamp

    def _unseen(self, session: Session, in_window: tuple[Any, ...]) -> list[Job]:
        """The window's jobs not counted yet: ids first (a narrow index scan), then the whole
        rows of the new ones only, for their signatures."""
        window = session.execute(select(Job.id).where(*in_window)).scalars().all()
        new = [job_id for job_id in window if job_id not in self.seen]
        rows: list[Job] = []
        for at in range(0, len(new), _IDS_PER_QUERY):  # bounded bind parameters per statement
            chunk = new[at : at + _IDS_PER_QUERY]
            rows.extend(session.scalars(select(Job).where(Job.id.in_(chunk))))
        return rows


def _progress_end(
    first: float | None, first_ms: int | None, last: float | None, last_ms: int | None
) -> float:
    """When a job's stored progress readings say it ends (``model.progress_end``); 0 without
    two readings."""
    if first is None or first_ms is None or last is None or last_ms is None:
        return 0.0
    return progress_end(first, first_ms / 1000, last, last_ms / 1000)


def admission_jobs(
    session: Session, *, holding_only: bool = False
) -> tuple[list[core.WaitingJob], list[core.RunningJob]]:
    """Queued jobs and CPU-holding jobs with their signature keys (``holding_only``: no queued
    job, for a reader of what is booked, whose cost must not grow with the queue).

    The columns a plan needs, fetched through Core: a Promise round reads every waiting job, and
    loading them as ORM objects about doubled what reading 10,000 cost (270 to 410 ms against
    150 to 240 ms, measured in one process). The session's pending rows are flushed first, as
    its own ``execute`` would."""
    columns = (
        Job.id, Job.state, Job.requested_tasks, Job.deadline_s, Job.submitted_ms,
        Job.admitted_ms, Job.granted_cpus, Job.task_floor_s, Job.name, Job.run, Job.owner,
        Job.tags, Job.queue, Job.progress_first, Job.progress_first_ms, Job.progress_last,
        Job.progress_last_ms,
    )  # fmt: skip
    stmt = (
        select(*columns)
        .where(Job.state.in_([*HOLDING_STATES] if holding_only else [QUEUED, *HOLDING_STATES]))
        .order_by(Job.submitted_ms, Job.id)
    )
    session.flush()
    waiting: list[core.WaitingJob] = []
    running: list[core.RunningJob] = []
    for row in session.connection().execute(stmt):
        job_id, state, tasks, deadline_s, submitted_ms, admitted_ms, cpus, floor = row[:8]
        keys = run_keys(*row[8:13])
        submitted = submitted_ms / 1000
        if state == QUEUED:
            timed = times_tasks(row[9])
            waiting.append(core.WaitingJob(job_id, tasks, deadline_s, submitted, keys, timed=timed))
        else:
            started, cpus = (admitted_ms or submitted_ms) / 1000, cpus or 0
            seen = (floor or 0.0, _progress_end(*row[13:]))
            running.append(
                core.RunningJob(job_id, tasks, deadline_s, submitted, started, cpus, keys, *seen)
            )
    return waiting, running
