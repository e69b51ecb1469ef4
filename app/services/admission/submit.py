"""Write-ahead submission (``docs/yarn.md`` 4.1, 4.2): reserve an id and store it (state
``submitting``) before ``POST /apps``, then mark ``submitted``; a reserved id is submitted again,
never a fresh one, so no job runs twice.

Adoption trusts only the id the job reserved: anyone who can submit to YARN can tag an app
``sidecar-job:<id>``, so an admitted job (nothing reserved, so no app of its own can exist) is
never matched to a tagged app, and a ``submitting`` job adopts its reserved id alone, and only
in the job's queue (the reserved id in another queue is someone else's app: the job fails, as
its own can no longer land). Other apps carrying the tag are not the job's: adoption kills them
(they can only be their submitter's own apps, never the reserved one), as the stray sweep does
later. The RM answers a ``POST /apps`` of an id it already holds with success whoever holds it,
so after every POST the app is read back, and the same rule decides there and in adoption: an
app without the job's tag is someone else's (the job fails, the app is left alone); one with
its tag is the job's in the job's queue, or in another queue when it runs as the user the job
names (a CapacityScheduler queue mapping placed it there); any other tagged app holding the
id is an impostor, killed, and the job fails."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sqlalchemy.orm import Session

from app.db import control_repo, history_repo, jobs_repo, leader_repo, repo
from app.db.jobs_models import Job
from app.db.promise_history import job_keys
from app.db.session import transaction
from app.domain import tags as t
from app.domain.model import AppRecord, queue_names
from app.jobs.contexts import RUN_AS, JobLaunch, TemplateUnavailable, build_context
from app.jobs.rounds import record_step
from app.policies.hybridmr import profiles
from app.services.admission.reaper import Reaper
from app.yarn.errors import RMError, RMRejected


class Submission(Reaper):
    """Submitting and adopting admitted jobs' apps (it sets their timeouts as the reaper does)."""

    async def _submit(self, job: Job) -> None:
        """Adopt the job's reserved app if YARN has it, else submit the reserved id again, or
        reserve one (write-ahead) and submit it."""
        if job.state == t.SUBMITTING and job.app_id is not None:
            tag = t.job_tag(job.id)
            tagged = [a for a in await self.rm.apps(tags=[tag]) if tag in a.tags]
            reserved = [a for a in tagged if a.app_id == job.app_id]
            if reserved:
                await self._adopt(job, reserved[0], [a for a in tagged if a is not reserved[0]])
                return
            # An earlier POST /apps of the reserved id may still land (it timed out, or we
            # crashed): submit the same id again, never a fresh one, so at most one app exists.
            if not await asyncio.to_thread(self._may_resubmit, job):
                return
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
        # The RM answers a POST of an id it already knows with success (or "already present")
        # whoever submitted it, so the answer does not say the app is the job's: read it back.
        if not await self._read_back(job, app_id):
            return
        if not await asyncio.to_thread(self._mark_submitted, job, app_id, expiry):
            if await asyncio.to_thread(self._ended_meanwhile, job.id):
                # Killed or cancelled while we were submitting: the app must not run on.
                await self.rm.kill_application(app_id, "job ended before submission completed", 0)
            # Otherwise another sidecar (a new leader) settled the same reserved id: it is the
            # job's app, and that sidecar owns it now.
            return
        await self._set_timeout_at(job.id, app_id, expiry)

    def _may_resubmit(self, job: Job) -> bool:
        """Whether this process may ``POST /apps`` the job's reserved id again: it still leads
        (the epoch fence of ``_reserve``) and the job is still submitting that id."""
        try:
            with transaction(self.sessions) as session:
                leader_repo.check_epoch(session, self.epoch())
                now = jobs_repo.get_job(session, job.id)
                return now is not None and (now.state, now.app_id) == (t.SUBMITTING, job.app_id)
        except leader_repo.Fenced as exc:
            self.log.warning("job %s: %s not submitted again: %s", job.id, job.app_id, exc)
            return False

    def _ended_meanwhile(self, job_id: str) -> bool:
        with self.sessions() as session:
            now = jobs_repo.get_job(session, job_id)
            return now is not None and (
                now.state in (t.KILLING, t.CANCELLING) or now.state in t.FINAL_STATES
            )

    def _reserve(self, job: Job, app_id: str, expiry_ms: int) -> bool:
        now = self.clock()
        try:
            with transaction(self.sessions) as session:
                leader_repo.check_epoch(session, self.epoch())
                placed = self._place(session, job, now) if job.app_id is None else None
                label = job.node_label if placed is None else placed[0]
                won = jobs_repo.transition_app(
                    session, job.id, [job.state], job.app_id, now,
                    state=t.SUBMITTING, app_id=app_id, lifetime_expiry_ms=expiry_ms,
                    node_label=label,
                )  # fmt: skip
                if won and placed is not None:
                    record_step(
                        session, self.cfg, job.id, "place", placed[1].reason, now,
                        cpus=job.granted_cpus or 0, node_label=label,
                        **placed[1].numbers(),
                    )  # fmt: skip
                if won:
                    job.node_label = label
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

    def _place(
        self, session: Session, job: Job, now_ms: int
    ) -> tuple[str | None, profiles.Placement] | None:
        """HybridMR Algorithm 2 for a job about to be submitted (``profiles.place``): the label
        of the partition it goes to (None: shared) and why; None when placement is off."""
        label = self.options.placement_label
        if not label:
            return None
        cluster = repo.get_cluster(session, self.cfg.cluster_name)
        if cluster is None:
            return None
        totals = control_repo.latest_totals(session, cluster.id, now_ms)
        book = profiles.ProfileBook(
            history_repo.runs(session, cluster.id, limit=history_repo.PROFILE_RUNS)
        )
        placed = profiles.place(
            book,
            job_keys(job).chain(),
            float(job.input_bytes) if job.input_bytes else None,
            max(0.0, (job.deadline_ms - now_ms) / 1000),
            totals.vcores if totals else 0.0,
        )
        return (label if placed.partition == "native" else None), placed

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

    async def _adopt(self, job: Job, app: AppRecord, others: Sequence[AppRecord]) -> None:
        """Take the job's reserved app (the POST /apps whose answer was lost); other apps tagged
        for the job are someone's own apps, not the job's, and are killed."""
        if not await self._claim(job, app):
            return
        killed: list[str] = []
        for other in others:
            if not other.is_finished:
                await self.rm.kill_application(other.app_id, f"not the job's {app.app_id}", 0)
                killed.append(other.app_id)
        expiry = self.lifetime_expiry_ms(job)
        adopted = await asyncio.to_thread(self._store_adoption, job, app, expiry, killed)
        if adopted and not app.is_finished:
            await self._set_timeout_at(job.id, app.app_id, expiry)

    async def _read_back(self, job: Job, app_id: str) -> bool:
        """Whether the app YARN holds under the job's id after a POST is the job's (``_claim``);
        True too when the RM could not be asked (the poll then finds it as any submitted app)."""
        try:
            app = await self.rm.app(app_id)
        except RMError as exc:
            self.log.warning("job %s: %s not read back after submission: %s", job.id, app_id, exc)
            return True
        return await self._claim(job, app)

    async def _claim(self, job: Job, app: AppRecord) -> bool:
        """Whether ``app``, which holds the job's reserved id, is the job's; if not the job
        fails, and an app carrying the job's tag is killed first (only the job's own app or an
        impostor of it can carry both its id and its tag)."""
        why, impostor = _not_the_jobs(job, app)
        if why is None:
            return True
        if impostor and not app.is_finished:
            await self.rm.kill_application(app.app_id, f"not sidecar job {job.id}'s app", 0)
        await asyncio.to_thread(self._fail, job.id, app.app_id, why)
        return False

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
                    "not submitted again" + (f"; killed strays {killed}" if killed else ""),
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


def _not_the_jobs(job: Job, app: AppRecord) -> tuple[str | None, bool]:
    """Why the app holding the job's reserved id is not the job's (None: it is), and whether it
    carries the job's tag. The job's own app carries its tag and runs in its queue, or, where a
    CapacityScheduler queue mapping placed it in another, as the user it was submitted as."""
    held = f"{app.app_id} is held by an app of {app.user} in queue {app.queue}"
    if t.job_tag(job.id) not in app.tags:
        return f"{held} without the job's tag: not the job's", False
    if _same_queue(app.queue, job.queue):
        return None, True
    run_as = job.run.get(RUN_AS) if isinstance(job.run, dict) else None
    if run_as and app.user == run_as:
        return None, True
    return (
        f"{held}, not {job.queue}, and not as the job's user: killed, not adopted (a queue "
        "mapping moves the job's own app only where the job names the user it runs as)",
        True,
    )


def _same_queue(reported: str, configured: str) -> bool:
    """Whether the RM's name for an app's queue names the job's queue: either may be a path or
    a leaf name (``queue_names``)."""
    return reported in queue_names(configured) or configured in queue_names(reported)


def _already_submitted(exc: RMRejected) -> bool:
    """An RM that refuses a re-submitted id because it already has it: the submit succeeded.

    ``ClientRMService`` answers a known id with success; a recovering RM's ``RMAppManager`` may
    instead say it is "already present".
    """
    message = exc.message.lower()
    return "already present" in message or "already exists" in message


def _launch(job: Job) -> JobLaunch:
    return JobLaunch(
        job_id=job.id,
        name=job.name,
        queue=job.queue,
        deadline_ms=job.deadline_ms,
        granted_cpus=job.granted_cpus or 1,
        run=job.run,
        user_tags=[str(tag) for tag in job.tags],
        tasks=job.requested_tasks,
        node_label=job.node_label,
    )
