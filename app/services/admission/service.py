"""The admission service's API entry points (``POST /jobs``, ``DELETE /jobs/{id}``) and its
tick: learn, admit, act."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from sqlalchemy.exc import DataError, IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from app.auth.principal import current_label, current_user
from app.db import jobs_repo
from app.db.jobs_models import Job, JobDecision
from app.db.session import transaction
from app.domain import tags as t
from app.domain.model import FINAL_APP_STATES
from app.jobs import first_wave, tick_round
from app.jobs.eta_plans import EtaPlans
from app.jobs.promise_memory import PromiseMemory
from app.jobs.rounds import (
    AdmissionConfig,
    LearnResult,
    RoundMark,
    RoundResult,
    admission_round,
    capacity,
    learn_pass,
    policy_of,
    record_step,
)
from app.policies.promise.admission import PromiseAdmission
from app.services.admission.common import (
    JobRejected,
    JobsRM,
    NewJob,
    ServiceOptions,
    Submitted,
)
from app.services.admission.kicks import Kicks
from app.services.admission.policy import PolicyChoice
from app.services.admission.submit import Submission
from app.services.admission_batch import Overloaded, SubmissionBatcher
from app.services.base import Clock, LoopService, wall_clock_ms
from app.yarn.errors import RMNotFound, RMProtocolError, RMRejected, RMUnavailable

_T = TypeVar("_T")

# Running jobs whose first wave one tick times (two RM requests each), earliest deadline first.
MAX_TIMED_JOBS = 100


class AdmissionService(LoopService, PolicyChoice, Kicks, Submission):
    """Deadline jobs: admission, submission to YARN, kills, learning."""

    name = "admission"

    def __init__(
        self,
        rm: JobsRM,
        sessions: sessionmaker[Session],
        cfg: AdmissionConfig,
        options: ServiceOptions,
        *,
        interval_s: float,
        clock: Clock = wall_clock_ms,
    ) -> None:
        super().__init__(interval_s, clock)
        self.rm = rm
        self.sessions = sessions
        # ``default_cfg`` is the settings' policy; ``cfg`` the one the last round ran, which
        # ``PUT /admission`` (stored in the database, read by every round) may have changed.
        self.default_cfg = cfg
        self.cfg = cfg
        self._cfg_known: tuple[tuple[str, str, int], AdmissionConfig] | None = None
        self.options = options
        # Serialises admission and learning in this process (SQLite has no row locks; on
        # PostgreSQL the estimator row lock does the same across processes).
        self._db_lock = threading.Lock()
        self._batcher: SubmissionBatcher[NewJob, Submitted] = SubmissionBatcher(
            self._db_lock, self._create_batch
        )
        self._act_lock = asyncio.Lock()
        # ``POST /jobs`` being served now (counted by the route, on the event loop).
        self.submissions_in_flight = 0
        self.eager = False
        # Leadership (``app.services.leader``): only the leader acts on YARN, and each
        # submission records and is fenced by its epoch. The defaults are one process.
        self.may_act: Callable[[], bool] = lambda: True
        self.epoch: Callable[[], int | None] = lambda: None
        self._kicked: asyncio.Task[None] | None = None
        self._kick_again = False
        self.last_round: RoundResult | None = None
        # The mark of this process's last committed round (``rounds.RoundMark``): what a
        # submission round may rely on to decide only the new jobs. Set after each commit.
        self._mark: RoundMark | None = None
        self.last_learn: LearnResult | None = None
        # Jobs whose first wave has had a task end, by deadline (ms): their bound is final, so
        # their containers are not read again (dropped from here once the deadline passes). In
        # memory: a new leader reads each once more to learn it. A later attempt of such a job
        # (its ApplicationMaster retried) is not timed either: the bound its first attempt left
        # is still a task's duration, only a lower one than the new attempt might show, and the
        # deadline kill still applies.
        self._waves_over: dict[str, int] = {}
        # The latest plan of the queued jobs' ETAs, for ``GET /jobs/{id}``; admission re-plans at
        # least once an interval, so a reader may answer from a plan that old.
        self.eta_plans = EtaPlans(max_age_ms=round(interval_s * 1000))
        # Promise's estimator and arrival meter in this process, brought up to date before each
        # round takes ``_db_lock`` (``warm``). Once the loop runs, a round or a reader that finds
        # the whole history to read starts that read in a thread of its own and does not wait.
        self.promise = PromiseMemory()
        self._warming: threading.Thread | None = None
        self._warming_lock = threading.Lock()

    @property
    def has_harness(self) -> bool:
        """Whether the built-in ``sleep`` template can be launched."""
        return self.options.harness is not None

    # ---- API entry points ----------------------------------------------------------------------

    def create_job(self, new: NewJob, now_ms: int, *, arrived: float | None = None) -> Submitted:
        """Store a job and run admission on it in one transaction (called from a worker thread).

        Raises ``JobRejected`` (409) in observe mode or when the idempotency key was used for a
        different request, (503) when admission stayed saturated for the whole wait, counted from
        ``arrived`` (``time.monotonic()`` when the request came in; default: now). Concurrent
        calls share one transaction and one round (``admission_batch``).
        """
        if not self.options.writes_enabled:
            raise JobRejected(
                409, "mode", "the sidecar is in observe mode and submits nothing to YARN"
            )
        if new.owner is None:
            new = replace(new, owner=current_user(), principal=current_label())
        try:
            return self._batcher.submit(new, now_ms, arrived=arrived)
        except Overloaded as exc:
            raise JobRejected(503, "load", str(exc)) from exc

    def _create_batch(self, items: Sequence[tuple[NewJob, int]]) -> list[Submitted | BaseException]:
        """Concurrent submissions in one transaction and one round (under ``_db_lock``)."""
        try:
            return self._create_many(items)
        except (IntegrityError, DataError):
            # Another process stored one of these idempotency keys first, or the database
            # refused one job's value: one at a time, so only that job fails.
            out: list[Submitted | BaseException] = []
            for new, now_ms in items:
                try:
                    out.append(self._create_one(new, now_ms))
                except Exception as exc:
                    out.append(exc)
            return out

    def _create_one(self, new: NewJob, now_ms: int) -> Submitted:
        try:
            outcome = self._create_many([(new, now_ms)])[0]
        except IntegrityError:
            if new.idempotency_key is None:
                raise
            replay = self._replay(new)
            if replay is None:
                raise
            return replay
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _create_many(self, items: Sequence[tuple[NewJob, int]]) -> list[Submitted | BaseException]:
        """Store the batch and decide it with one round, in a number of statements that does not
        grow with the batch: one lookup of every idempotency key (with the stored jobs' first
        decisions), the rows inserted together, and, when the round is incremental, the new
        jobs decided from memory and nothing read back."""
        out: list[Submitted | BaseException | None] = [None] * len(items)
        result: RoundResult | None = None
        with transaction(self.sessions) as session:
            keys = {key for new, _ in items if (key := _scoped_key(new)) is not None}
            stored = jobs_repo.jobs_by_keys(session, keys)
            created: list[tuple[int, Job]] = []
            # A key already used in this batch replays the job the batch creates for it.
            replays: list[tuple[int, Job, NewJob]] = []
            by_key: dict[jobs_repo.ScopedKey, Job] = {}
            for i, (new, now_ms) in enumerate(items):
                key = _scoped_key(new)
                if key is not None and key in stored:
                    job, first = stored[key]
                    out[i] = _replayed(job, first, new)
                    continue
                if key is not None and key in by_key:
                    replays.append((i, by_key[key], new))
                    continue
                job = job_row(new, now_ms)
                if key is not None:
                    by_key[key] = job
                created.append((i, job))
            if created:
                round_ms = max(now_ms for _, now_ms in items)
                result = admission_round(
                    session,
                    self.current_cfg(session),
                    round_ms,
                    "submission",
                    since=self._mark,
                    new_jobs=[job for _, job in created],
                    principals={job.id: items[i][0].principal for i, job in created},
                    memory=self.promise,
                )
                self.last_round = result
                if not result.incremental:
                    # The round changed them with compare-and-set updates: read them again.
                    jobs_repo.reload_jobs(session, [job.id for _, job in created])
                for i, job in created:
                    out[i] = Submitted(job, result.requester_decisions.get(job.id), True)
            for i, job, new in replays:
                # Its only decision is the one this round recorded: its first.
                first = result.requester_decisions.get(job.id) if result is not None else None
                out[i] = _replayed(job, first, new)
        if result is not None:
            self._committed(result)
        return [o for o in out if o is not None]

    def _committed(self, result: RoundResult) -> None:
        """What the next submission round may assume, and the ETAs readers may answer with."""
        self._mark = result.mark
        if result.plan is not None:
            self.eta_plans.remember(result.plan)

    def _replay(self, new: NewJob) -> Submitted | None:
        key = _scoped_key(new)
        assert key is not None
        with transaction(self.sessions) as session:
            found = jobs_repo.jobs_by_keys(session, [key])
            if not found:
                return None
            job, first = found[key]
            replay = _replayed(job, first, new)
            if isinstance(replay, JobRejected):
                raise replay
            return replay

    def cancel_job(self, job_id: str, now_ms: int) -> Job | None:
        """Mark a job cancelled (not yet on YARN) or cancelling (its app must be killed).

        Idempotent; ``None`` for an unknown job; ``JobRejected`` (409) if it already ended. A job
        that moves on while we look (admitted -> submitting) is looked at again.
        """
        for _ in range(5):
            with transaction(self.sessions) as session:
                job = jobs_repo.get_job(session, job_id)
                if job is None or job.state in (t.CANCELLED, t.CANCELLING):
                    return job
                if job.state in t.FINAL_STATES:
                    raise JobRejected(409, "id", f"job {job_id} already ended ({job.state})")
                if self._mark_cancelled(session, job, now_ms):
                    session.refresh(job)
                    return job
        raise JobRejected(409, "id", f"job {job_id} keeps changing state; try again")

    def _mark_cancelled(self, session: Session, job: Job, now_ms: int) -> bool:
        target = t.CANCELLED if job.state in (t.QUEUED, t.ADMITTED) else t.CANCELLING
        won = jobs_repo.transition(
            session, job.id, [job.state], now_ms, state=target, reason="cancelled by the user"
        )
        if won:
            record_step(
                session, self.cfg, job.id, "cancel", "cancelled by the user", now_ms,
                principal=current_label(), previous_state=job.state, app_id=job.app_id,
            )  # fmt: skip
        return won

    async def finish_cancel(self, job_id: str, wait_s: float) -> None:
        """Kill a cancelled job's app now if the action lock frees within ``wait_s``; a follower
        leaves it to the leader (only the leader writes to YARN), the job staying cancelling."""
        if not self.may_act():
            return
        try:
            await asyncio.wait_for(self._act_lock.acquire(), timeout=wait_s)
        except TimeoutError:
            return
        try:
            job = await asyncio.to_thread(self._load_job, job_id)
            if job is not None and job.state == t.CANCELLING:
                await self._end_app(job)
        finally:
            self._act_lock.release()

    def stop(self) -> None:
        """Stop the loop and cancel a tick started by ``kick`` (its steps are restartable)."""
        super().stop()
        if self._kicked is not None:
            self._kicked.cancel()

    # ---- the tick ------------------------------------------------------------------------------

    async def run_once(self, now_ms: int) -> None:
        try:
            await self._check_unseen()
        except RMUnavailable as exc:
            self.log.warning("RM unavailable, unseen apps are looked up next tick: %s", exc)
        self.last_learn = await asyncio.to_thread(self._learn, now_ms)
        if self.may_act():
            try:
                await self._time_running(now_ms)
            except RMUnavailable as exc:
                self.log.warning("RM unavailable, running jobs are timed next tick: %s", exc)
        trigger = "completion" if self.last_learn.finished_jobs else "tick"
        await self._warm_here()
        self.last_round = await asyncio.to_thread(self._round, now_ms, trigger)
        if self.options.writes_enabled:
            await self.act()

    async def _time_running(self, now_ms: int) -> None:
        """Time the running jobs whose tasks run one per container, for Promise's first-wave
        and progress rules (the one policy with either); the round that follows reads what is
        stored."""
        over = self._waves_over
        for job_id in [j for j, deadline_ms in over.items() if deadline_ms < now_ms]:
            del over[job_id]
        with self.sessions() as session:
            policy = policy_of(self.peek_cfg(session))
            if not isinstance(policy, PromiseAdmission):
                return
            several = jobs_repo.timed_jobs(session, MAX_TIMED_JOBS, skip=over)
            every = []
            if policy.planner.progress_s > 0:
                every = jobs_repo.timed_jobs(session, MAX_TIMED_JOBS, waves=False)
        await self._time_first_waves(several)
        await self._read_progress(every, now_ms)

    async def _from_rm(self, job_id: str, what: str, read: Awaitable[_T]) -> _T | None:
        """``read``'s answer, or None (logged) where the RM has no such app or answers amiss;
        an unavailable RM ends the tick's timing (``run_once``)."""
        try:
            return await read
        except (RMNotFound, RMRejected, RMProtocolError) as exc:
            self.log.info("job %s: its %s could not be read: %s", job_id, what, exc)
            return None

    async def _time_first_waves(self, timed: Sequence[tuple[str, str, int]]) -> None:
        """Time the first wave of each job of several waves in ``timed`` from its attempt's
        live containers (``app.jobs.first_wave``), for Promise's first-wave rule."""
        floors: dict[str, float] = {}
        for job_id, app_id, deadline_ms in timed:
            attempt = await self._from_rm(job_id, "containers", self.rm.attempt_containers(app_id))
            if attempt is None:
                continue
            timing = first_wave.time_first_wave(attempt)
            if timing.floor_s is not None:
                floors[job_id] = timing.floor_s
            if timing.ended:
                self._waves_over[job_id] = deadline_ms
        if floors:
            await asyncio.to_thread(self._store_floors, floors)

    def _store_floors(self, floors: dict[str, float]) -> None:
        with self._db_lock, transaction(self.sessions) as session:
            jobs_repo.raise_task_floors(session, floors)

    async def _read_progress(self, timed: Sequence[tuple[str, str, int]], now_ms: int) -> None:
        """Read the progress of each job in ``timed`` from its app (MapReduce's ApplicationMaster
        reports its tasks' share done), for Promise's progress rule (``PromiseParams.
        progress_s``); the round projects each job's end from its first and latest readings."""
        readings: dict[str, tuple[float, int]] = {}
        for job_id, app_id, _ in timed:
            app = await self._from_rm(job_id, "progress", self.rm.app(app_id))
            if app is not None and app.state == "RUNNING":
                readings[job_id] = (min(1.0, max(0.0, app.progress / 100)), now_ms)
        if readings:
            await asyncio.to_thread(self._store_progress, readings)

    def _store_progress(self, readings: dict[str, tuple[float, int]]) -> None:
        with self._db_lock, transaction(self.sessions) as session:
            jobs_repo.record_progress(session, readings)

    async def run_gated(self, now_ms: int) -> None:
        # A follower runs no round but serves submissions: its estimator is kept up to date
        # too, so its first submission does not read the whole history. In a thread of its own,
        # not awaited: a tick still running when this process takes the lead would make the
        # scheduler skip the leader's first run (``app.services.runtime``).
        self.promise.warmer = self.start_warming
        self.start_warming()

    async def _warm_here(self) -> None:
        # From the first tick on, this process reads Promise's whole history only in ``warm``.
        self.promise.warmer = self.start_warming
        await asyncio.to_thread(self.warm)

    def start_warming(self) -> None:
        """Run ``warm`` in a thread of its own unless one runs (``PromiseMemory.warmer``: a
        round or a reader found the whole history to read)."""
        with self._warming_lock:
            if self._warming is not None and self._warming.is_alive():
                return
            self._warming = threading.Thread(
                target=self._warm_logged, name="promise-warm", daemon=True
            )
            self._warming.start()

    def _warm_logged(self) -> None:
        try:
            self.warm()
        except Exception:
            self.log.exception("Promise's estimator could not be brought up to date")

    def warm(self) -> None:
        """Bring Promise's estimator up to date without the admission lock (a round then learns
        only what ends meanwhile); nothing under another policy or before the first poll."""
        with self.sessions() as session:
            cfg = self.peek_cfg(session)
            cap = capacity(session, cfg)
            if cfg.promise is None or cap is None:
                return
            took = self.promise.warm(session, dict(cfg.promise), cap)
        if took > self.interval_s:
            self.log.info("Promise's estimator read its history in %.1fs", took)

    def _learn(self, now_ms: int) -> LearnResult:
        with self._db_lock, transaction(self.sessions) as session:
            return learn_pass(session, self.current_cfg(session), now_ms)

    def _round(self, now_ms: int, trigger: str) -> RoundResult:
        if trigger == "tick":
            quiet = self._tick_round(now_ms)
            if quiet is not None:
                return quiet
        with self._db_lock:
            with transaction(self.sessions) as session:
                cfg = self.current_cfg(session)
                result = admission_round(session, cfg, now_ms, trigger, memory=self.promise)
            self._committed(result)
            return result

    def _tick_round(self, now_ms: int) -> RoundResult | None:
        """A tick that ranks the waiting jobs before taking the admission lock
        (``app.jobs.tick_round``); ``None`` when the full round must run."""
        with self.sessions() as session:
            taken = tick_round.snapshot(session, self.peek_cfg(session), now_ms, self._mark)
        if taken is None:
            return None
        with self._db_lock:
            with transaction(self.sessions) as session:
                cfg = self.current_cfg(session)
                result = tick_round.apply(session, cfg, now_ms, "tick", taken, self._mark)
            if result is not None:
                self._committed(result)
            return result

    async def act(self) -> None:
        """Kill, submit and set timeouts for every job that needs it.

        An RM that is down ends the pass at the first call (the next tick tries again); an RM
        that refuses one job's request only skips that job.
        """
        async with self._act_lock:
            try:
                await self._act_on(t.KILLING, t.CANCELLING)
                await self._act_on(t.ADMITTED, t.SUBMITTING)
                await self._act_on(t.SUBMITTED)
                await self._kill_strays()
            except RMUnavailable as exc:
                self.log.warning("RM unavailable, YARN actions wait for the next tick: %s", exc)

    async def _act_on(self, *states: str) -> None:
        for job in await asyncio.to_thread(self._load, states):
            try:
                await self._step(job)
            except (RMRejected, RMProtocolError) as exc:
                self.log.warning("job %s (%s): the RM refused a step: %s", job.id, job.state, exc)

    def _step(self, job: Job) -> Awaitable[None]:
        if job.state in (t.KILLING, t.CANCELLING):
            return self._end_app(job)
        if job.state in (t.ADMITTED, t.SUBMITTING):
            return self._submit(job)
        if not job.timeout_set and job.app_state not in FINAL_APP_STATES:
            return self._set_timeout(job)
        return asyncio.sleep(0)

    def _load(self, states: Sequence[str]) -> list[Job]:
        with self.sessions() as session:
            # Submitted jobs only need a step while their LIFETIME timeout is not set.
            return jobs_repo.jobs_in(session, states, with_timeout=t.SUBMITTED not in states)

    def _load_job(self, job_id: str) -> Job | None:
        with self.sessions() as session:
            return jobs_repo.get_job(session, job_id)


def job_row(new: NewJob, now_ms: int) -> Job:
    """The row ``POST /jobs`` stores for ``new`` (queued)."""
    return jobs_repo.new_job_row(
        name=new.name,
        queue=new.queue,
        requested_tasks=new.requested_tasks,
        input_bytes=new.input_bytes,
        block_size=new.block_size,
        deadline_ms=new.deadline_ms,
        run=new.run,
        tags=new.tags,
        idempotency_key=new.idempotency_key,
        request_hash=new.request_hash,
        now_ms=now_ms,
        owner=new.owner,
    )


def _scoped_key(new: NewJob) -> jobs_repo.ScopedKey | None:
    """``new``'s idempotency key among its owner's (``jobs_repo.key_scope``), if it has one."""
    if new.idempotency_key is None:
        return None
    return (jobs_repo.key_scope(new.owner), new.idempotency_key)


def _replayed(job: Job, first: JobDecision | None, new: NewJob) -> Submitted | JobRejected:
    """The answer to a request whose key ``job`` was stored with (``first``: its first
    decision), or the conflict it raises."""
    if job.request_hash != new.request_hash:
        return JobRejected(
            409, "idempotency_key", f"was already used for job {job.id} with a different request"
        )
    return Submitted(job, first, False)
