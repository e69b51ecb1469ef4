"""Ending what should not run on: LIFETIME timeouts (``docs/yarn.md`` 4.6), kills of killed or
cancelled jobs' apps (4.3), jobs whose app the RM forgot, and stray apps tagged for a job that
are not its app or whose job already ended."""

from __future__ import annotations

import asyncio

from app.db import jobs_repo
from app.db.jobs_models import Job
from app.db.session import transaction
from app.domain import tags as t
from app.domain.model import FINAL_APP_STATES, FINISHED_GRACE_MS, AppRecord
from app.jobs.rounds import learn_pass, record_step
from app.services.admission.common import LANDING_GRACE_MS, ServiceState
from app.services.poller import APP_REFRESH_S
from app.yarn.errors import RMNotFound

# How long a submitted job's app may go unlisted by the poller before it is looked up by id.
# A new app is listed on the poller's next tick as a rule, but one missed then (it moved from
# pending to RUNNING between two of the tick's list calls) is listed only when its slice of
# start instants comes round, once per ``APP_REFRESH_S``, and one that ended before any tick saw
# it once the finished window, reaching up to ``FINISHED_GRACE_MS`` behind the watermark, or the
# settling read covers its end. The poll's stamp is its start, so a slow poll only waits longer.
# The lookup fails a job only when the RM does not know its app: the grace spares the RM
# lookups of apps the poller is about to list, and bounds how long a lost app's CPUs stay booked.
UNLISTED_GRACE_MS = int(APP_REFRESH_S * 1000) + FINISHED_GRACE_MS


class Reaper(ServiceState):
    """Timeouts, kills, forgotten apps and strays."""

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
        """Look up, by id, each job's app that the last good poll no longer listed, or that no
        good poll has listed ``UNLISTED_GRACE_MS`` after its submission."""
        for job_id, app_id, listed in await asyncio.to_thread(self._unseen):
            try:
                record = await self.rm.app(app_id)
            except RMNotFound:
                await asyncio.to_thread(self._forgotten, job_id, app_id, listed)
                continue
            # Still known. Ended (e.g. before the poller's finished window): the learning pass
            # ends the job from this record. Live: left to the poller, which lists every app the
            # RM holds; a row written here would be one the poller's memory does not know, so it
            # could never mark it gone, and a job whose app the RM then lost would hold its CPUs.
            if record.is_finished:
                await asyncio.to_thread(self._store_seen, record)

    def _unseen(self) -> list[tuple[str, str, bool]]:
        with self.sessions() as session:
            states = [t.SUBMITTED, t.KILLING, t.CANCELLING]
            return jobs_repo.unseen_job_apps(
                session, self.cfg.cluster_name, states, UNLISTED_GRACE_MS
            )

    def _store_seen(self, record: AppRecord) -> None:
        with self._db_lock, transaction(self.sessions) as session:
            self._store_app(session, record, self.clock())

    def _forgotten(self, job_id: str, app_id: str, listed: bool) -> None:
        """The RM does not know the app (evicted after its end, or its state store lost it,
        perhaps before any poll listed it): its outcome is unknowable, so the job fails, frees
        its CPUs and teaches nothing."""
        now = self.clock()
        seen = "its end was seen" if listed else "any poll listed it"
        reason = f"application {app_id} unknown to the RM: it dropped the app before {seen}"
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
