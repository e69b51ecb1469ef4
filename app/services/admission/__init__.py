"""The admission service: admit deadline jobs, run them on YARN, learn from outcomes.

Each tick (``run_once``), after the ``docs/style.md`` tick: observe -> decide -> act -> record.

1. **Learn** (``rounds.learn_pass``): jobs whose applications the poller saw end are finished and
   feed TRACK_JOB (seed 004, Algorithm 3), as do apps submitted straight to YARN with a
   ``deadline:`` tag, each exactly once.
2. **Admit** (``rounds.admission_round``, Algorithm 6): drops, admits, kills. ``POST /jobs`` runs
   the same round in its own transaction before it answers.
3. **Act** on YARN, one job at a time, each step recorded before or after the RM call so a crash
   anywhere is recoverable (queued and admitted jobs live in the database, not here):

   * submit (``docs/yarn.md`` 4.1, 4.2): reserve an id with new-application and store it with
     state ``submitting`` (write-ahead) before ``POST /apps``; then mark ``submitted``. A restart
     or an ambiguous ``POST /apps`` (timed out: it may still land) leaves a ``submitting`` job:
     it adopts its reserved id when the tag query ``sidecar-job:<id>`` lists it (in the job's
     queue), or submits that id again, never a fresh one (the RM ignores a re-submit of a known
     id), so no job runs twice and none is lost. Only the reserved id is ever adopted: anyone
     can tag an app ``sidecar-job:<id>``, so an admitted job (nothing reserved) never looks, and
     a tagged app with another id is a stray, never kept over the job's own. The re-submit is
     fenced by the leader epoch as the reservation is, and a submit that finds the job already
     settled by another sidecar kills its app only if the job is being killed, cancelled or
     has ended. Safety nets: adoption kills the other tagged apps; each tick kills polled live
     apps tagged for a job that are not its app or whose job ended (an app landing after its job
     was cancelled).
   * apps the RM forgot: a job's app that the last good poll no longer lists (the RM evicted it
     or lost its state), or that no good poll has listed 3 minutes after its submission
     (``reaper.UNLISTED_GRACE_MS``), is looked up by id; unknown to the RM, the job fails and
     frees its CPUs, unlearned.
   * LIFETIME timeout (4.6) at the deadline for jobs above ``drop_threshold`` tasks, at
     ``deadline + job_overrun_factor * deadline_s`` for smaller ones (``docs/policies.md``: smaller
     violators run on so their outcome still teaches the estimator). Retried until set.
   * kill (4.3) of jobs the policy killed or the user cancelled (by the leader only: a follower
     serving ``DELETE /jobs/{id}`` leaves the job cancelling); the final app record is stored
     and ends the job in the same transaction. A reserved id the RM does not know yet keeps the
     job cancelling/killing for ``LANDING_GRACE_MS`` after the reservation, in case its
     ``POST /apps`` is still in flight.

Mode: ``observe`` never writes to YARN (``POST /jobs`` is refused, tagged apps are still learned
from); ``advise`` and ``enforce`` run jobs submitted through the sidecar, which the user handed
to it explicitly, including the kill rule. One active sidecar per database is the supported
deployment; the compare-and-set steps keep a second one from submitting a job twice.

The service is one ``AdmissionService`` assembled from parts, one concern a module:
``service`` (API entry points and the tick), ``policy`` (the admission policy a round runs,
``PUT /admission``), ``kicks`` (coalescing act passes after submissions), ``submit`` (the
write-ahead submission and adoption), ``reaper`` (timeouts, kills, apps the RM forgot, strays)
and ``common`` (the types and state they share). ``app.services.admission_batch`` groups
concurrent submissions into one round.
"""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from app.jobs.rounds import config_from_settings
from app.services.admission.common import (
    LANDING_GRACE_MS,
    JobRejected,
    JobsRM,
    NewJob,
    ServiceOptions,
    Submitted,
)
from app.services.admission.service import AdmissionService, job_row
from app.settings import Mode, Settings
from app.yarn.workload import Harness

__all__ = [
    "LANDING_GRACE_MS",
    "AdmissionService",
    "JobRejected",
    "JobsRM",
    "NewJob",
    "ServiceOptions",
    "Submitted",
    "build_admission_service",
    "config_from_settings",
    "job_row",
]


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
            placement_label=settings.placement_label,
        ),
        interval_s=settings.admission_interval_s,
    )
    service.eager = eager
    return service
