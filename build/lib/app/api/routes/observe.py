"""``GET /overview``, ``GET /queues/series`` and ``GET /job-etas``: the read models the ``/ui``
dashboard draws (everything derived from the recorded history, ``app.db.observe_repo``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status

from app.api.deps import SessionDep, StateDep
from app.api.observe_schemas import JobEtaOut, OverviewOut, QueueNowOut, QueueSeriesOut
from app.api.routes.queues import to_ms
from app.api.schemas import ErrorOut, ms_to_dt
from app.db import observe_repo, repo

router = APIRouter(tags=["dashboard"])


def _dts(values: list[int]) -> list[dt.datetime]:
    return [dt.datetime.fromtimestamp(v / 1000, dt.UTC) for v in values]


@router.get("/overview", response_model=OverviewOut)
async def overview(state: StateDep) -> OverviewOut:
    """Active policy and mode, every queue's latest numbers, job and push counts."""
    policy = mode = None
    if state.controller is not None:
        ctx = await asyncio.to_thread(state.controller.current, state.controller.clock())
        policy, mode = ctx.cfg.policy, ctx.cfg.mode

    def read() -> observe_repo.Snapshot:
        with state.sessions() as session:
            return observe_repo.snapshot(session, state.settings.cluster_name)

    snap = await asyncio.to_thread(read)
    return OverviewOut(
        cluster=state.settings.cluster_name,
        policy=policy,
        mode=mode,
        last_good_poll_at=ms_to_dt(snap.last_good_poll_ms),
        last_decision_at=ms_to_dt(snap.last_decision_ms),
        queues=[
            QueueNowOut(
                path=q.path,
                is_leaf=q.is_leaf,
                configured=q.configured,
                desired=q.desired,
                pushed=q.pushed,
                weight=q.weight,
                share=q.share,
                debt=q.debt,
                discrimination=q.discrimination,
                used_capacity=q.used_capacity,
                used_vcores=q.used_vcores,
                pending_containers=q.pending_containers,
                running_apps=q.running_apps,
                drift=q.drift,
            )
            for q in snap.queues
        ],
        jobs_by_state=snap.jobs_by_state,
        deadlines=snap.deadlines,
        pushes_by_outcome=snap.pushes_by_outcome,
        controller_by_status=snap.control_by_status,
    )


@router.get(
    "/queues/series",
    response_model=QueueSeriesOut,
    responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def queue_series(
    state: StateDep,
    session: SessionDep,
    path: Annotated[str, Query(description="Full queue path, e.g. root.etl.")],
    since: Annotated[dt.datetime | None, Query(description="ISO 8601; default 6 h ago.")] = None,
    until: Annotated[dt.datetime | None, Query(description="ISO 8601; default now.")] = None,
    points: Annotated[int, Query(ge=10, le=5000, description="Most points per series.")] = 400,
) -> QueueSeriesOut:
    """One queue over time: capacity and usage per sample, weight and target per controller
    decision, LTRF debt per ledger interval; thinned to ``points``."""
    until_ms = to_ms(until) if until else int(time.time() * 1000)
    since_ms = to_ms(since) if since else until_ms - 6 * 3_600_000
    if since_ms >= until_ms:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "since: must be before until")
    cluster = repo.get_cluster(session, state.settings.cluster_name)
    series = (
        observe_repo.queue_series(session, cluster.id, path, since_ms, until_ms, points)
        if cluster is not None
        else None
    )
    if series is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"path: no queue {path!r}")
    return QueueSeriesOut(
        path=series.path,
        t=_dts(series.t),
        capacity=series.capacity,
        used_capacity=series.used_capacity,
        absolute_used=series.absolute_used,
        decision_t=_dts(series.decision_t),
        weight=series.weight,
        desired=series.desired,
        debt_t=_dts(series.debt_t),
        debt=series.debt,
    )


@router.get("/job-etas", response_model=dict[str, JobEtaOut], responses={422: {"model": ErrorOut}})
def job_etas(
    session: SessionDep,
    job_id: Annotated[list[str], Query(description="Job ids (repeat; at most 200).")],
) -> dict[str, JobEtaOut]:
    """Progress and ETA of the given jobs' YARN applications (jobs without one are left out)."""
    if len(job_id) > 200:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "job_id: at most 200 ids")
    return {
        k: JobEtaOut(progress=v["progress"], eta=ms_to_dt(v["eta_ms"]), app_state=v["app_state"])
        for k, v in observe_repo.job_etas(session, job_id).items()
    }
