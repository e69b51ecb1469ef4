"""``/jobs``: submit deadline-tagged jobs, list them, see every decision, cancel.

``POST /jobs`` stores the job and runs admission (Justice or PYTHIA, seed 004 Algorithm 6) in one
committed transaction before it answers ``202`` with the first decision; the YARN submission of
an admitted job follows right after, in the admission service. An ``Idempotency-Key`` header (or
``idempotency_key`` field) makes retries safe: the same key and body answer ``200`` with the job
already stored, the same key with another body ``409``.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, Path, Query, Response, status
from starlette.concurrency import run_in_threadpool

from app.api.auth import Submitter, Viewer, forbidden
from app.api.deps import StateDep, retry_later
from app.api.job_guard import check_run, may_manage, render_template, run_as
from app.api.jobs_schemas import (
    MAX_DEADLINE_S,
    MAX_TASKS,
    JobAccepted,
    JobDecisionOut,
    JobDetail,
    JobIn,
    JobOut,
    JobPage,
)
from app.api.params import cursor_errors, require_choice
from app.api.routes.queues import to_ms
from app.api.schemas import ErrorOut, ms_to_dt, ms_to_utc
from app.api.state import SidecarState
from app.auth.principal import Role
from app.db import jobs_repo
from app.db.jobs_models import Job, JobDecision
from app.domain.tags import JOB_STATES, requested_tasks
from app.jobs.contexts import RUN_AS
from app.jobs.promise_round import current_eta
from app.jobs.rounds import config_from_settings
from app.services.admission import AdmissionService, JobRejected, NewJob
from app.services.base import wall_clock_ms

router = APIRouter(tags=["jobs"])

CANCEL_WAIT_S = 15.0
# Seconds a client is asked to wait after a 503 (admission saturated).
RETRY_AFTER_S = 1
# Submissions being served at once (waiting for a worker thread or the admission lock) beyond
# which a new one is refused at once; below it, each waits at most ``ADMIT_WAIT_S`` in all.
MAX_SUBMISSIONS_IN_FLIGHT = 1024


def _service(state: SidecarState) -> AdmissionService:
    service = state.admission
    if service is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "admission service not running")
    return service


def _at(ms: int | None) -> dt.datetime | None:
    return ms_to_dt(ms) if ms else None


def decision_out(row: JobDecision) -> JobDecisionOut:
    """A decision row as the API shows it."""
    return JobDecisionOut(
        at=ms_to_utc(row.created_ms),
        action=row.action,
        policy=row.policy,
        cpus=row.cpus,
        req_cpus=row.req_cpus,
        fraction=row.fraction,
        ttd_s=row.ttd_s,
        priority=row.priority,
        reason=row.reason,
        numbers=row.numbers,
        round_id=row.round_id,
        principal=row.principal,
    )


def job_out(row: Job) -> JobOut:
    """A job row as the API shows it."""
    return JobOut(
        id=row.id,
        name=row.name,
        queue=row.queue,
        state=row.state,
        requested_tasks=row.requested_tasks,
        input_bytes=row.input_bytes,
        block_size=row.block_size,
        deadline_s=row.deadline_s,
        deadline_at=ms_to_utc(row.deadline_ms),
        submitted_at=ms_to_utc(row.submitted_ms),
        run=row.run,
        tags=[str(tag) for tag in row.tags],
        idempotency_key=row.idempotency_key,
        granted_cpus=row.granted_cpus,
        admitted_at=_at(row.admitted_ms),
        app_id=row.app_id,
        app_state=row.app_state,
        final_status=row.final_status,
        yarn_submitted_at=_at(row.yarn_submitted_ms),
        lifetime_expiry_at=_at(row.lifetime_expiry_ms),
        finished_at=_at(row.finished_ms),
        elapsed_ms=row.elapsed_ms,
        vcore_seconds=row.vcore_seconds,
        met_deadline=row.met_deadline,
        task_floor_s=row.task_floor_s,
        progress=row.progress_last,
        reason=row.reason,
        updated_at=ms_to_utc(row.updated_ms),
        owner=row.owner,
    )


def _new_job(body: JobIn, key: str | None, state: SidecarState, now_ms: int) -> NewJob:
    """The service's request, or a 422 naming the field."""
    if body.run.kind == "sleep" and (state.admission is None or not state.admission.has_harness):
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            "run.kind: the sleep template needs YARN_SIDECAR_DSHELL_HARNESS (a distributed-shell"
            " cluster.json); use kind 'application' with your own AM command",
        )
    if (body.requested_tasks is None) == (body.input_bytes is None):
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            "requested_tasks: give exactly one of requested_tasks or input_bytes",
        )
    if isinstance(body.deadline, dt.datetime):
        deadline_ms = to_ms(body.deadline)
        if deadline_ms <= now_ms:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                f"deadline: {body.deadline.isoformat()} is not in the future",
            )
        # An absolute time obeys the same horizon as a number of seconds.
        if deadline_ms - now_ms > MAX_DEADLINE_S * 1000:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                f"deadline: more than {MAX_DEADLINE_S:g} seconds from now",
            )
    else:
        deadline_ms = now_ms + round(body.deadline * 1000)
    tasks = requested_tasks(body.requested_tasks, body.input_bytes, body.block_size)
    if tasks > MAX_TASKS:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"input_bytes: {tasks} tasks at block_size {body.block_size}; at most {MAX_TASKS}",
        )
    return NewJob(
        name=body.name,
        queue=body.queue or state.settings.deadline_queue,
        deadline_ms=deadline_ms,
        requested_tasks=tasks,
        input_bytes=body.input_bytes,
        block_size=body.block_size if body.input_bytes is not None else None,
        run=body.run.model_dump(mode="json"),
        tags=body.tags,
        idempotency_key=key,
        request_hash=body.fingerprint(),
    )


def _idempotency_key(body: JobIn, header: str | None) -> str | None:
    if header is not None and not 1 <= len(header) <= 200:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT, "Idempotency-Key: 1 to 200 characters"
        )
    if header is not None and body.idempotency_key is not None and header != body.idempotency_key:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            "idempotency_key: differs from the Idempotency-Key header",
        )
    return header if header is not None else body.idempotency_key


@router.post(
    "/jobs",
    response_model=JobAccepted,
    status_code=status.HTTP_202_ACCEPTED,
    responses={
        200: {"model": JobAccepted, "description": "Idempotent replay: the job already stored."},
        409: {"model": ErrorOut, "description": "Key reused with another body; observe mode."},
        422: {"description": "Invalid request; the detail names the field."},
        503: {"model": ErrorOut, "description": "Saturated: not stored; see Retry-After."},
    },
)
async def submit_job(
    body: JobIn,
    state: StateDep,
    principal: Submitter,
    response: Response,
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", description="Makes retries safe.")
    ] = None,
) -> JobAccepted:
    """Submit a deadline job; answers once it and its first decision are committed."""
    service = _service(state)
    check_run(body, principal, state.settings)
    rendered = render_template(body, principal, state.settings, state.templates)
    now_ms = service.clock()
    new = _new_job(body, _idempotency_key(body, idempotency_key), state, now_ms)
    if service.submissions_in_flight >= MAX_SUBMISSIONS_IN_FLIGHT:
        raise retry_later(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "load: too many submissions in flight; retry shortly",
            RETRY_AFTER_S,
        )
    service.submissions_in_flight += 1  # the event loop's thread only: no lock needed
    user = run_as(principal, state.settings)
    if rendered is not None or user is not None:
        run = dict(rendered if rendered is not None else new.run)
        if user is not None:
            run[RUN_AS] = user
        new = replace(new, run=run)
    try:
        result = await run_in_threadpool(service.create_job, new, now_ms, arrived=time.monotonic())
    except JobRejected as exc:
        # 503: admission is saturated; the request was not stored and is safe to repeat.
        headers = {"Retry-After": str(RETRY_AFTER_S)} if exc.status == 503 else None
        raise HTTPException(exc.status, f"{exc.field}: {exc.message}", headers=headers) from exc
    finally:
        service.submissions_in_flight -= 1
    if not result.created:
        response.status_code = status.HTTP_200_OK
    elif result.job.state == "admitted":
        service.kick()
    response.headers["Location"] = f"/jobs/{result.job.id}"
    decision = decision_out(result.decision) if result.decision else None
    eta = (result.decision.numbers or {}).get("eta") if result.decision else None
    return JobAccepted(**job_out(result.job).model_dump(), decision=decision, eta=eta)


@router.get("/jobs", response_model=JobPage, responses={400: {"model": ErrorOut}})
def list_jobs(
    state_: StateDep,
    _viewer: Viewer,
    state: Annotated[str | None, Query(description=f"One of {', '.join(JOB_STATES)}.")] = None,
    queue: Annotated[str | None, Query(description="Leaf name or full path.")] = None,
    submitted_from: Annotated[dt.datetime | None, Query(description="ISO 8601, inclusive.")] = None,
    submitted_to: Annotated[dt.datetime | None, Query(description="ISO 8601, exclusive.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page.")] = None,
) -> JobPage:
    """Jobs, newest submission first."""
    require_choice(state, JOB_STATES, "state")
    flt = jobs_repo.JobFilter(
        state=state,
        queue=queue,
        submitted_from_ms=to_ms(submitted_from) if submitted_from else None,
        submitted_to_ms=to_ms(submitted_to) if submitted_to else None,
    )
    # Closed before serialising, in this worker thread (see get_job).
    with state_.sessions() as session, cursor_errors():
        rows, next_cursor = jobs_repo.list_jobs(session, flt, limit, cursor)
        return JobPage(items=[job_out(r) for r in rows], next_cursor=next_cursor)


JobId = Annotated[str, Path(description="Job id from POST /jobs.", max_length=32)]


@router.get("/jobs/{job_id}", response_model=JobDetail, responses={404: {"model": ErrorOut}})
def get_job(state: StateDep, _viewer: Viewer, job_id: JobId) -> JobDetail:
    """One job with every decision and lifecycle step, oldest first (and its ETA)."""
    clock = state.admission.clock if state.admission else wall_clock_ms
    # The session is closed (its connection back in the pool) before the response is
    # serialised, in this same worker thread: a dependency's teardown would need another one.
    with state.sessions() as session:
        # The policy of the next round (``PUT /admission`` may have changed it on any replica).
        if state.admission is not None:
            cfg = state.admission.peek_cfg(session)
        else:
            cfg = config_from_settings(state.settings)
        row = jobs_repo.get_job(session, job_id)
        if row is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"job_id: no job {job_id!r}")
        recorded = jobs_repo.decisions_of(session, job_id)
        if state.admission is not None:
            plans, memory = state.admission.eta_plans, state.admission.promise
            eta = current_eta(session, cfg, job_id, row.state, clock(), recorded, plans, memory)
        else:
            eta = current_eta(session, cfg, job_id, row.state, clock(), recorded)
        decisions = [decision_out(d) for d in recorded]
        return JobDetail(**job_out(row).model_dump(), decisions=decisions, eta=eta)


@router.delete(
    "/jobs/{job_id}",
    response_model=JobOut,
    responses={
        202: {"model": JobOut, "description": "Cancelling: the YARN kill is still in flight."},
        404: {"model": ErrorOut},
        409: {"model": ErrorOut, "description": "The job already ended."},
    },
)
async def cancel_job(
    state: StateDep, principal: Submitter, job_id: JobId, response: Response
) -> JobOut:
    """Cancel a job; kills its YARN app if it has one. Repeating it is harmless. A submitter may
    cancel only its own jobs; an operator any."""
    service = _service(state)
    existing = await run_in_threadpool(_reload, state, job_id)
    if existing is not None and not may_manage(principal, existing.owner):
        raise forbidden(Role.OPERATOR, "cancelling another user's job")
    try:
        job = await run_in_threadpool(service.cancel_job, job_id, service.clock())
    except JobRejected as exc:
        raise HTTPException(exc.status, f"{exc.field}: {exc.message}") from exc
    if job is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job_id: no job {job_id!r}")
    if job.state == "cancelling" and service.options.writes_enabled:
        await service.finish_cancel(job_id, CANCEL_WAIT_S)
        job = await run_in_threadpool(_reload, state, job_id) or job
    if job.state == "cancelling":
        response.status_code = status.HTTP_202_ACCEPTED
    service.kick()
    return job_out(job)


def _reload(state: SidecarState, job_id: str) -> Job | None:
    with state.sessions() as session:
        return jobs_repo.get_job(session, job_id)
