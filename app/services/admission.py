"""The admission service (issue 6): admit deadline jobs, run them on YARN, learn from outcomes.

Each tick (``run_once``), after the ``docs/style.md`` tick: observe -> decide -> act -> record.

1. **Learn** (``rounds.learn_pass``): jobs whose applications the poller saw end are finished and
   feed TRACK_JOB (seed 004, Algorithm 3), as do apps submitted straight to YARN with a
   ``deadline:`` tag, each exactly once.
2. **Admit** (``rounds.admission_round``, Algorithm 6): drops, admits, kills. ``POST /jobs`` runs
   the same round in its own transaction before it answers.
3. **Act** on YARN, one job at a time, each step recorded before or after the RM call so a crash
   anywhere is recoverable (queued and admitted jobs live in the database, not here):

   * submit (``docs/yarn.md`` 4.1, 4.2): look for an app tagged ``sidecar-job:<id>`` first and adopt
     it; otherwise reserve an id with new-application and store it with state ``submitting``
     (write-ahead) before ``POST /apps``; then mark ``submitted``. A restart or an ambiguous
     ``POST /apps`` (timed out: it may still land) leaves a ``submitting`` job: it adopts its app
     by tag, or submits the reserved id again, never a fresh one (the RM ignores a re-submit of
     a known id), so no job runs twice and none is lost. Safety nets: adoption kills extra
     tagged apps; each tick kills polled live apps tagged for a job that are not its app or
     whose job ended (an app landing after its job was cancelled).
   * apps the RM forgot: a job's app that the last good poll no longer lists (the RM evicted it
     or lost its state) is looked up by id; unknown to the RM, the job fails and frees its CPUs,
     unlearned.
   * LIFETIME timeout (4.6) at the deadline for jobs above ``drop_threshold`` tasks, at
     ``deadline + job_overrun_factor * deadline_s`` for smaller ones (``docs/policies.md``: smaller
     violators run on so their outcome still teaches the estimator). Retried until set.
   * kill (4.3) of jobs the policy killed or the user cancelled; the final app record is stored
     and ends the job in the same transaction. A reserved id the RM does not know yet keeps the
     job cancelling/killing for ``LANDING_GRACE_MS`` after the reservation, in case its
     ``POST /apps`` is still in flight.

Mode: ``observe`` never writes to YARN (``POST /jobs`` is refused, tagged apps are still learned
from); ``advise`` and ``enforce`` run jobs submitted through the sidecar, which the user handed
to it explicitly, including the kill rule. One active sidecar per database is the supported
deployment; the compare-and-set steps keep a second one from submitting a job twice.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from app.db import jobs_repo, leader_repo, repo
from app.db.jobs_models import Job, JobDecision
from app.db.models import Decision
from app.db.session import transaction
from app.domain import tags as t
from app.domain.model import FINAL_APP_STATES, AppRecord
from app.jobs.contexts import JobLaunch, TemplateUnavailable, build_context
from app.jobs.rounds import (
    AdmissionConfig,
    LearnResult,
    RoundResult,
    admission_round,
    config_from_settings,
    learn_pass,
    policy_of,
    record_step,
    with_policy,
)
from app.policies import registry
from app.policies.base import PolicyError
from app.services.admission_batch import Overloaded, SubmissionBatcher
from app.services.base import Clock, LoopService, wall_clock_ms
from app.settings import Mode, Settings
from app.yarn.errors import RMNotFound, RMProtocolError, RMRejected, RMUnavailable
from app.yarn.wire import NewApplication
from app.yarn.workload import Harness


class JobsRM(Protocol):
    """What the service needs of ``app.yarn.client.RMClient``."""

    async def apps(self, *, tags: Sequence[str] | None = None) -> tuple[AppRecord, ...]: ...

    async def app(self, app_id: str) -> AppRecord: ...

    async def new_application(self) -> NewApplication: ...

    async def submit_application(self, context: Mapping[str, Any]) -> None: ...

    async def kill_application(
        self, app_id: str, diagnostics: str = "", wait_s: float = 30.0
    ) -> str: ...

    async def set_application_timeout(self, app_id: str, expiry_ms: int) -> None: ...


class JobRejected(Exception):
    """A job request the service refuses; ``status`` is the HTTP status the API answers."""

    def __init__(self, status: int, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.status = status
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class NewJob:
    """A validated job request (the API's body, free of HTTP)."""

    name: str
    queue: str
    deadline_ms: int
    requested_tasks: int
    input_bytes: int | None
    block_size: int | None
    run: Mapping[str, Any]
    tags: Sequence[str]
    idempotency_key: str | None
    request_hash: str


@dataclass(frozen=True, slots=True)
class Submitted:
    """The stored job and its first decision; ``created`` is False for an idempotent replay."""

    job: Job
    decision: JobDecision | None
    created: bool


@dataclass(frozen=True, slots=True)
class ServiceOptions:
    """Knobs of the service besides the policy."""

    rm_urls: tuple[str, ...]
    overrun_factor: float = 1.0
    harness: Harness | None = None
    writes_enabled: bool = True
    kill_wait_s: float = 10.0


# How long after reserving an id a timed-out POST /apps may still land. The client gives up after
# its timeout (seconds); a request queued behind a busy RM lands well within this.
LANDING_GRACE_MS = 300_000


class AdmissionService(LoopService):
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
        self._cfg_key: tuple[str, str, int] | None = None
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
        self.last_learn: LearnResult | None = None

    # ---- the admission policy -------------------------------------------------------------------

    def current_cfg(self, session: Session) -> AdmissionConfig:
        """The configuration this round runs: the stored ``PUT /admission`` choice, else the
        settings'. A stored choice that no longer validates (a parameter renamed by an upgrade)
        is logged and the settings' policy runs."""
        row = jobs_repo.admission_setting(session, self.default_cfg.cluster_name)
        if row is None:
            self.cfg, self._cfg_key = self.default_cfg, None
            return self.cfg
        key = (row.policy, json.dumps(row.params, sort_keys=True), row.updated_ms)
        if key != self._cfg_key:
            try:
                policy = registry.admission_policy(row.policy, row.params)
            except PolicyError as exc:
                self.log.error("stored admission policy %r is invalid (%s)", row.policy, exc)
                self.cfg, self._cfg_key = self.default_cfg, None
                return self.cfg
            self.cfg, self._cfg_key = with_policy(self.default_cfg, policy), key
        return self.cfg

    def policy_source(self, session: Session) -> str:
        """``operator`` when ``PUT /admission`` chose the policy, else ``settings``."""
        row = jobs_repo.admission_setting(session, self.default_cfg.cluster_name)
        return "settings" if row is None else "operator"

    def set_policy(self, name: str, params: Mapping[str, Any], now_ms: int) -> AdmissionConfig:
        """``PUT /admission``: validate through the registry (``PolicyError`` naming ``policy``
        or ``params.<name>``), store it and record the change in the audit trail."""
        policy = registry.admission_policy(name, params)
        with self._db_lock, transaction(self.sessions) as session:
            previous = self.current_cfg(session)
            old = policy_of(previous)
            jobs_repo.save_admission_setting(
                session, self.default_cfg.cluster_name, policy.name, dict(policy.params), now_ms
            )
            cluster = repo.ensure_cluster(
                session, self.default_cfg.cluster_name, self.options.rm_urls, now_ms
            )
            repo.add_decision(
                session,
                Decision(
                    cluster_id=cluster.id,
                    created_ms=now_ms,
                    kind="policy",
                    policy=policy.name,
                    mode=previous.mode,
                    params=dict(policy.params),
                    inputs={
                        "scope": "admission",
                        "previous": {"policy": old.name, "params": dict(old.params)},
                        "changes": {"policy": name, "params": dict(params)},
                    },
                    outputs={"admission": {"policy": policy.name, "params": dict(policy.params)}},
                    status="applied",
                    reason=f"operator set the admission policy to {policy.name}",
                ),
            )
            self._cfg_key = None
            return self.current_cfg(session)

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
        try:
            return self._batcher.submit(new, now_ms, arrived=arrived)
        except Overloaded as exc:
            raise JobRejected(503, "load", str(exc)) from exc

    def _create_batch(self, items: Sequence[tuple[NewJob, int]]) -> list[Submitted | BaseException]:
        """Concurrent submissions in one transaction and one round (under ``_db_lock``)."""
        try:
            return self._create_many(items)
        except IntegrityError:
            # Another process stored one of these idempotency keys first: one at a time.
            out: list[Submitted | BaseException] = []
            for new, now_ms in items:
                try:
                    out.append(self._create_one(new, now_ms))
                except Exception as exc:
                    out.append(exc)
            return out

    def _create_one(self, new: NewJob, now_ms: int) -> Submitted:
        try:
            return self._create(new, now_ms)
        except IntegrityError:
            if new.idempotency_key is None:
                raise
            replay = self._replay(new)
            if replay is None:
                raise
            return replay

    def _create(self, new: NewJob, now_ms: int) -> Submitted:
        with transaction(self.sessions) as session:
            if new.idempotency_key is not None:
                existing = jobs_repo.job_by_key(session, new.idempotency_key)
                if existing is not None:
                    return _replayed(session, existing, new)
            job = jobs_repo.add_job(session, _job_row(new, now_ms))
            cfg = self.current_cfg(session)
            result = admission_round(session, cfg, now_ms, "submission", requester=job.id)
            session.refresh(job)
            self.last_round = result
            return Submitted(job, result.requester_decision, True)

    def _create_many(self, items: Sequence[tuple[NewJob, int]]) -> list[Submitted | BaseException]:
        out: list[Submitted | BaseException | None] = [None] * len(items)
        with transaction(self.sessions) as session:
            created: list[tuple[int, Job]] = []
            replays: list[tuple[int, Job, NewJob]] = []
            by_key: dict[str, Job] = {}
            for i, (new, now_ms) in enumerate(items):
                key = new.idempotency_key
                existing = None
                if key is not None:
                    existing = by_key.get(key) or jobs_repo.job_by_key(session, key)
                if existing is not None:
                    replays.append((i, existing, new))
                    continue
                job = jobs_repo.add_job(session, _job_row(new, now_ms))
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
                    requesters=[job.id for _, job in created],
                )
                self.last_round = result
                for i, job in created:
                    session.refresh(job)
                    out[i] = Submitted(job, result.requester_decisions.get(job.id), True)
            for i, job, new in replays:
                try:
                    out[i] = _replayed(session, job, new)
                except JobRejected as exc:
                    out[i] = exc
        return [o for o in out if o is not None]

    def _replay(self, new: NewJob) -> Submitted | None:
        assert new.idempotency_key is not None
        with transaction(self.sessions) as session:
            existing = jobs_repo.job_by_key(session, new.idempotency_key)
            return None if existing is None else _replayed(session, existing, new)

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
                previous_state=job.state, app_id=job.app_id,
            )  # fmt: skip
        return won

    async def finish_cancel(self, job_id: str, wait_s: float) -> None:
        """Kill a cancelled job's app now if the action lock frees within ``wait_s``."""
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

    def kick(self) -> None:
        """Act on YARN soon (after an admission or a cancellation) when the loops are running.

        Only the act step runs: the request already ran its admission round. Kicks coalesce:
        while one runs, further kicks only ask it to run once more, so a burst of submissions
        costs a few passes, not one per request.
        """
        if not self.eager or not self.options.writes_enabled or not self.may_act():
            return
        if self._kicked is not None and not self._kicked.done():
            self._kick_again = True
            return
        self._kicked = asyncio.get_running_loop().create_task(self._kick_loop())

    async def _kick_loop(self) -> None:
        while True:
            self._kick_again = False
            try:
                await self.act()
            except Exception:
                self.log.exception("acting after a submission failed; the next tick retries")
            if not self._kick_again:
                return

    # ---- the tick ------------------------------------------------------------------------------

    async def run_once(self, now_ms: int) -> None:
        try:
            await self._check_unseen()
        except RMUnavailable as exc:
            self.log.warning("RM unavailable, unseen apps are looked up next tick: %s", exc)
        self.last_learn = await asyncio.to_thread(self._learn, now_ms)
        trigger = "completion" if self.last_learn.finished_jobs else "tick"
        self.last_round = await asyncio.to_thread(self._round, now_ms, trigger)
        if self.options.writes_enabled:
            await self.act()

    def _learn(self, now_ms: int) -> LearnResult:
        with self._db_lock, transaction(self.sessions) as session:
            return learn_pass(session, self.current_cfg(session), now_ms)

    def _round(self, now_ms: int, trigger: str) -> RoundResult:
        with self._db_lock, transaction(self.sessions) as session:
            return admission_round(session, self.current_cfg(session), now_ms, trigger)

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

    # ---- submission ----------------------------------------------------------------------------

    async def _submit(self, job: Job) -> None:
        """Adopt the job's app if YARN has one, else reserve an id (write-ahead) and submit."""
        tag = t.job_tag(job.id)
        mine = [a for a in await self.rm.apps(tags=[tag]) if tag in a.tags]
        if mine:
            await self._adopt(job, mine)
            return
        if job.state == t.SUBMITTING and job.app_id is not None:
            # An earlier POST /apps of the reserved id may still land (it timed out, or we
            # crashed): submit the same id again, never a fresh one, so at most one app exists.
            app_id, expiry = job.app_id, job.lifetime_expiry_ms or self.lifetime_expiry_ms(job)
        else:
            app_id, expiry = (await self.rm.new_application()).app_id, self.lifetime_expiry_ms(job)
            if not await asyncio.to_thread(self._reserve, job, app_id, expiry):
                return
        await self._submit_reserved(job, app_id, expiry)

    async def _submit_reserved(self, job: Job, app_id: str, expiry: int) -> None:
        try:
            context = build_context(_launch(job), app_id, self.options.harness)
        except (TemplateUnavailable, ValueError, OSError) as exc:
            await asyncio.to_thread(self._fail, job.id, app_id, f"cannot build it: {exc}")
            return
        try:
            await self.rm.submit_application(context)
        except RMRejected as exc:
            if not _already_submitted(exc):
                await asyncio.to_thread(self._fail, job.id, app_id, exc.message)
                return
        if not await asyncio.to_thread(self._mark_submitted, job, app_id, expiry):
            # Killed or cancelled while we were submitting: the app must not run on.
            await self.rm.kill_application(app_id, "job ended before submission completed", 0)
            return
        await self._set_timeout_at(job.id, app_id, expiry)

    def lifetime_expiry_ms(self, job: Job) -> int:
        """When YARN's LIFETIME timeout kills the job's app."""
        if job.requested_tasks > self.cfg.params.drop_threshold:
            return job.deadline_ms
        return job.deadline_ms + int(self.options.overrun_factor * job.deadline_s * 1000)

    def _reserve(self, job: Job, app_id: str, expiry_ms: int) -> bool:
        now = self.clock()
        try:
            with transaction(self.sessions) as session:
                leader_repo.check_epoch(session, self.epoch())
                won = jobs_repo.transition_app(
                    session, job.id, [job.state], job.app_id, now,
                    state=t.SUBMITTING, app_id=app_id, lifetime_expiry_ms=expiry_ms,
                )  # fmt: skip
                if won:
                    record_step(
                        session, self.cfg, job.id, "reserve",
                        f"reserved {app_id} before submitting (write-ahead)", now,
                        cpus=job.granted_cpus or 0, app_id=app_id, previous_app_id=job.app_id,
                        leader_epoch=self.epoch(),
                    )  # fmt: skip
                return won
        except leader_repo.Fenced as exc:
            self.log.warning("job %s not submitted: %s", job.id, exc)
            return False

    def _mark_submitted(self, job: Job, app_id: str, expiry_ms: int) -> bool:
        now = self.clock()
        with transaction(self.sessions) as session:
            won = jobs_repo.transition_app(
                session, job.id, [t.SUBMITTING], app_id, now,
                state=t.SUBMITTED, yarn_submitted_ms=now, reason=f"submitted as {app_id}",
            )  # fmt: skip
            if won:
                record_step(
                    session, self.cfg, job.id, "submit",
                    f"submitted {app_id} to {job.queue} with {job.granted_cpus} vcores", now,
                    cpus=job.granted_cpus or 0, app_id=app_id, queue=job.queue,
                    lifetime_expiry_ms=expiry_ms,
                )  # fmt: skip
            return won

    async def _adopt(self, job: Job, apps: Sequence[AppRecord]) -> None:
        """Take the job's existing app (a restart after submit); extra ones are duplicates."""
        keep, *extra = sorted(apps, key=lambda a: (a.submitted_ms or 0, a.app_id))
        killed: list[str] = []
        for dup in extra:
            if not dup.is_finished:
                await self.rm.kill_application(dup.app_id, f"duplicate of {keep.app_id}", 0)
                killed.append(dup.app_id)
        expiry = self.lifetime_expiry_ms(job)
        adopted = await asyncio.to_thread(self._store_adoption, job, keep, expiry, killed)
        if adopted and not keep.is_finished:
            await self._set_timeout_at(job.id, keep.app_id, expiry)

    def _store_adoption(self, job: Job, app: AppRecord, expiry_ms: int, killed: list[str]) -> bool:
        now = self.clock()
        with self._db_lock, transaction(self.sessions) as session:
            won = jobs_repo.transition_app(
                session, job.id, [job.state], job.app_id, now,
                state=t.SUBMITTED, app_id=app.app_id, app_state=app.state,
                final_status=app.final_status, lifetime_expiry_ms=expiry_ms,
                yarn_submitted_ms=app.submitted_ms, reason=f"adopted {app.app_id}",
            )  # fmt: skip
            if won:
                record_step(
                    session, self.cfg, job.id, "adopt",
                    f"YARN already had {app.app_id} tagged {t.job_tag(job.id)}: adopted, "
                    "not submitted again" + (f"; killed duplicates {killed}" if killed else ""),
                    now, cpus=job.granted_cpus or 0, app_id=app.app_id, app_state=app.state,
                    killed_duplicates=killed,
                )  # fmt: skip
                self._store_app(session, app, now)
            return won

    def _fail(self, job_id: str, app_id: str, why: str) -> None:
        now = self.clock()
        with transaction(self.sessions) as session:
            reason = f"submission of {app_id} failed: {why}"
            if jobs_repo.transition(
                session, job_id, [t.SUBMITTING], now, state=t.FAILED, reason=reason
            ):
                record_step(session, self.cfg, job_id, "fail", reason, now, app_id=app_id)

    # ---- timeouts ------------------------------------------------------------------------------

    async def _set_timeout(self, job: Job) -> None:
        assert job.app_id is not None
        expiry = job.lifetime_expiry_ms or self.lifetime_expiry_ms(job)
        await self._set_timeout_at(job.id, job.app_id, expiry)

    async def _set_timeout_at(self, job_id: str, app_id: str, expiry_ms: int) -> None:
        await self.rm.set_application_timeout(app_id, expiry_ms)
        await asyncio.to_thread(self._timeout_done, job_id, expiry_ms)

    def _timeout_done(self, job_id: str, expiry_ms: int) -> None:
        now = self.clock()
        with transaction(self.sessions) as session:
            jobs_repo.transition(
                session, job_id, list(t.JOB_STATES), now,
                timeout_set=True, lifetime_expiry_ms=expiry_ms,
            )  # fmt: skip

    # ---- kills ---------------------------------------------------------------------------------

    async def _end_app(self, job: Job) -> None:
        """Kill the app of a killing or cancelling job and finish the job from its final record."""
        why = "cancelled by the user" if job.state == t.CANCELLING else job.reason
        if job.app_id is None:
            await asyncio.to_thread(self._end_without_app, job, "no YARN application")
            return
        try:
            state = await self.rm.kill_application(
                job.app_id, f"yarn-sidecar: {why}", self.options.kill_wait_s
            )
        except RMNotFound:
            # Reserved but not on YARN: a POST /apps that timed out may still land, so the job
            # stays cancelling/killing (retried each tick) until the grace has passed. An app
            # landing even later is killed by the stray sweep (``_kill_strays``).
            if not await asyncio.to_thread(self._may_still_land, job):
                why = f"{job.app_id} never reached YARN"
                await asyncio.to_thread(self._end_without_app, job, why)
            return
        if state in FINAL_APP_STATES:
            record = await self.rm.app(job.app_id)
            await asyncio.to_thread(self._store_final, record)

    def _may_still_land(self, job: Job) -> bool:
        if job.yarn_submitted_ms is not None:
            return False  # the RM had it and dropped it since: nothing is in flight
        with self.sessions() as session:
            reserved = jobs_repo.last_step_ms(session, job.id, "reserve")
        return reserved is not None and self.clock() - reserved < LANDING_GRACE_MS

    def _end_without_app(self, job: Job, why: str) -> None:
        now = self.clock()
        end = t.CANCELLED if job.state == t.CANCELLING else t.KILLED
        with transaction(self.sessions) as session:
            if jobs_repo.transition(session, job.id, [job.state], now, state=end):
                record_step(session, self.cfg, job.id, end, why, now, app_id=job.app_id)

    # ---- apps the RM dropped or that should not run -------------------------------------------

    async def _check_unseen(self) -> None:
        """Look up, by id, each job's app that the last good poll no longer listed."""
        for job_id, app_id in await asyncio.to_thread(self._unseen):
            try:
                record = await self.rm.app(app_id)
            except RMNotFound:
                await asyncio.to_thread(self._forgotten, job_id, app_id)
                continue
            # Still known (e.g. it ended before the poller's finished window): the learning
            # pass ends the job from this record.
            await asyncio.to_thread(self._store_seen, record)

    def _unseen(self) -> list[tuple[str, str]]:
        with self.sessions() as session:
            states = [t.SUBMITTED, t.KILLING, t.CANCELLING]
            return jobs_repo.unseen_job_apps(session, self.cfg.cluster_name, states)

    def _store_seen(self, record: AppRecord) -> None:
        with self._db_lock, transaction(self.sessions) as session:
            self._store_app(session, record, self.clock())

    def _forgotten(self, job_id: str, app_id: str) -> None:
        """The RM no longer knows the app (evicted after its end, or its state store was lost):
        its outcome is unknowable, so the job fails, frees its CPUs and teaches nothing."""
        now = self.clock()
        reason = (
            f"application {app_id} unknown to the RM: it dropped the app before its end was seen"
        )
        with self._db_lock, transaction(self.sessions) as session:
            if jobs_repo.transition(
                session, job_id, [t.SUBMITTED, t.KILLING, t.CANCELLING], now,
                state=t.FAILED, reason=reason, app_state=None,
            ):  # fmt: skip
                record_step(session, self.cfg, job_id, "fail", reason, now, app_id=app_id)

    async def _kill_strays(self) -> None:
        """Kill live apps tagged for a job that are not its current app (the duplicate of an
        ambiguous submit) or whose job already ended, as the latest good poll listed them."""
        for job_id, app_id, why in await asyncio.to_thread(self._strays):
            try:
                await self.rm.kill_application(app_id, f"yarn-sidecar: {why}", 0)
            except RMNotFound:
                continue
            await asyncio.to_thread(self._record_stray, job_id, app_id, why)

    def _strays(self) -> list[tuple[str, str, str]]:
        with self.sessions() as session:
            found = []
            for app in jobs_repo.live_job_tagged_apps(session, self.cfg.cluster_name):
                job_id = t.job_id_of(app.tags.split(","))
                job = None if job_id is None else jobs_repo.get_job(session, job_id)
                # Jobs still being submitted are settled by adoption, not here.
                if job is None or job.state in (t.QUEUED, t.ADMITTED, t.SUBMITTING):
                    continue
                if job.state in t.FINAL_STATES:
                    found.append((job.id, app.app_id, f"job {job.id} already {job.state}"))
                elif app.app_id != job.app_id:
                    found.append((job.id, app.app_id, f"duplicate of {job.app_id}"))
            return found

    def _record_stray(self, job_id: str, app_id: str, why: str) -> None:
        now = self.clock()
        with transaction(self.sessions) as session:
            record_step(session, self.cfg, job_id, "kill-stray", f"killed {app_id}: {why}", now,
                        app_id=app_id)  # fmt: skip

    def _store_final(self, record: AppRecord) -> None:
        """Store the app's final record and run the learning pass that finishes its job."""
        now = self.clock()
        with self._db_lock, transaction(self.sessions) as session:
            self._store_app(session, record, now)
            self.last_learn = learn_pass(session, self.cfg, now)

    def _store_app(self, session: Session, record: AppRecord, now_ms: int) -> None:
        cluster = repo.ensure_cluster(session, self.cfg.cluster_name, self.options.rm_urls, now_ms)
        repo.upsert_apps(session, cluster.id, [record], now_ms)


# ---- helpers -------------------------------------------------------------------------------------


def _already_submitted(exc: RMRejected) -> bool:
    """An RM that refuses a re-submitted id because it already has it: the submit succeeded.

    ``ClientRMService`` answers a known id with success; a recovering RM's ``RMAppManager`` may
    instead say it is "already present".
    """
    message = exc.message.lower()
    return "already present" in message or "already exists" in message


def _job_row(new: NewJob, now_ms: int) -> Job:
    return Job(
        id=new_job_id(),
        name=new.name,
        queue=new.queue,
        state=t.QUEUED,
        requested_tasks=new.requested_tasks,
        input_bytes=new.input_bytes,
        block_size=new.block_size,
        deadline_s=(new.deadline_ms - now_ms) / 1000,
        deadline_ms=new.deadline_ms,
        submitted_ms=now_ms,
        run=dict(new.run),
        tags=list(new.tags),
        idempotency_key=new.idempotency_key,
        request_hash=new.request_hash,
        timeout_set=False,
        reason="",
        updated_ms=now_ms,
    )


def new_job_id() -> str:
    """A random 32-hex-digit id (lower case, as YARN stores tags)."""
    return uuid.uuid4().hex


def _replayed(session: Session, job: Job, new: NewJob) -> Submitted:
    if job.request_hash != new.request_hash:
        raise JobRejected(
            409, "idempotency_key", f"was already used for job {job.id} with a different request"
        )
    return Submitted(job, jobs_repo.first_decision(session, job.id), False)


def _launch(job: Job) -> JobLaunch:
    return JobLaunch(
        job_id=job.id,
        name=job.name,
        queue=job.queue,
        deadline_ms=job.deadline_ms,
        granted_cpus=job.granted_cpus or 1,
        run=job.run,
        user_tags=[str(tag) for tag in job.tags],
    )


def build_admission_service(
    settings: Settings, rm: JobsRM, sessions: sessionmaker[Session], *, eager: bool
) -> AdmissionService:
    """The service as the lifespan runs it; ``eager`` lets submissions trigger a tick at once."""
    harness = (
        Harness.from_cluster_json(settings.dshell_harness) if settings.dshell_harness else None
    )
    service = AdmissionService(
        rm,
        sessions,
        config_from_settings(settings),
        ServiceOptions(
            rm_urls=settings.rm_urls,
            overrun_factor=settings.job_overrun_factor,
            harness=harness,
            writes_enabled=settings.mode is not Mode.OBSERVE,
        ),
        interval_s=settings.admission_interval_s,
    )
    service.eager = eager
    return service
