"""``GET /apps`` (filters, cursor pagination) and ``GET /apps/{app_id}``."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, status

from app.api.deps import SessionDep
from app.api.history_schemas import AppDetailOut, MapReduceOut, PhaseOut, TaskOut
from app.api.params import cursor_errors, require_choice
from app.api.routes.queues import to_ms
from app.api.schemas import AppOut, AppPage, ErrorOut, ms_to_dt
from app.db import history_repo, repo
from app.db.history_models import MapReduceJobRow, MapReduceTaskRow
from app.db.models import Application

router = APIRouter(tags=["apps"])

APP_STATES = (
    "NEW",
    "NEW_SAVING",
    "SUBMITTED",
    "ACCEPTED",
    "RUNNING",
    "FINISHED",
    "FAILED",
    "KILLED",
)


def app_out(row: Application) -> AppOut:
    """An application row as the API shows it."""
    return AppOut(
        app_id=row.app_id,
        user=row.user,
        queue=row.queue,
        name=row.name,
        app_type=row.app_type,
        tags=row.tag_list,
        state=row.state,
        final_status=row.final_status,
        progress=row.progress,
        submitted_at=ms_to_dt(row.submitted_ms),
        started_at=ms_to_dt(row.started_ms),
        launched_at=ms_to_dt(row.launched_ms),
        finished_at=ms_to_dt(row.finished_ms),
        elapsed_ms=row.elapsed_ms,
        allocated_vcores=row.allocated_vcores,
        allocated_mb=row.allocated_mb,
        vcore_seconds=row.vcore_seconds,
        memory_seconds=row.memory_seconds,
        running_containers=row.running_containers,
        priority=row.priority,
        diagnostics=row.diagnostics,
        first_seen_at=ms_to_dt(row.first_seen_ms),
        updated_at=ms_to_dt(row.updated_ms),
    )


@router.get("/apps", response_model=AppPage, responses={400: {"model": ErrorOut}})
def list_apps(
    session: SessionDep,
    queue: Annotated[str | None, Query(description="Leaf name or full path.")] = None,
    user: str | None = None,
    state: Annotated[
        str | None, Query(description=f"One of {', '.join(APP_STATES)} (case-insensitive).")
    ] = None,
    tag: Annotated[
        str | None, Query(description="Application tag (YARN lower-cases tags).")
    ] = None,
    submitted_from: Annotated[dt.datetime | None, Query(description="ISO 8601, inclusive.")] = None,
    submitted_to: Annotated[dt.datetime | None, Query(description="ISO 8601, exclusive.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page.")] = None,
) -> AppPage:
    """Recorded applications, newest submission first."""
    require_choice(state.upper() if state else None, APP_STATES, "state")
    flt = repo.AppFilter(
        queue=queue,
        user=user,
        state=state,
        tag=tag,
        submitted_from_ms=to_ms(submitted_from) if submitted_from else None,
        submitted_to_ms=to_ms(submitted_to) if submitted_to else None,
    )
    with cursor_errors():
        rows, next_cursor = repo.list_apps(session, flt, limit, cursor)
    return AppPage(items=[app_out(r) for r in rows], next_cursor=next_cursor)


@router.get("/apps/{app_id}", response_model=AppDetailOut, responses={404: {"model": ErrorOut}})
def get_app(
    session: SessionDep, app_id: Annotated[str, Path(description="YARN application id.")]
) -> AppDetailOut:
    """One recorded application; a MapReduce job also shows its tasks, phases and counters once
    the JobHistory server has been read."""
    row = repo.get_app(session, app_id)
    if row is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"app_id: no application {app_id!r} recorded"
        )
    found = history_repo.job_of(session, app_id)
    return AppDetailOut(
        **app_out(row).model_dump(), mapreduce=mapreduce_out(*found) if found else None
    )


def mapreduce_out(job: MapReduceJobRow, tasks: list[MapReduceTaskRow]) -> MapReduceOut:
    """A stored MapReduce history row as the API shows it."""
    return MapReduceOut(
        status=job.status,
        attempts=job.attempts,
        fetched_at=ms_to_dt(job.fetched_ms),
        last_error=job.last_error,
        job_id=job.job_id,
        state=job.state,
        maps_total=job.maps_total,
        maps_completed=job.maps_completed,
        reduces_total=job.reduces_total,
        reduces_completed=job.reduces_completed,
        phases={
            "map": PhaseOut(
                duration_ms=job.map_phase_ms,
                tasks=job.maps_completed,
                avg_task_ms={"map": job.avg_map_ms},
                peak_vcores=job.map_peak_vcores,
            ),
            "reduce": PhaseOut(
                duration_ms=job.reduce_phase_ms,
                tasks=job.reduces_completed,
                avg_task_ms={
                    "shuffle": job.avg_shuffle_ms,
                    "merge": job.avg_merge_ms,
                    "reduce": job.avg_reduce_ms,
                },
                peak_vcores=job.reduce_peak_vcores,
            ),
        },
        input_bytes=job.input_bytes,
        output_bytes=job.output_bytes,
        shuffle_bytes=job.shuffle_bytes,
        spilled_records=job.spilled_records,
        cpu_ms=job.cpu_ms,
        vcore_ms=job.vcore_ms,
        cluster_vcores=job.cluster_vcores,
        counters=job.counters or {},
        tasks=[
            TaskOut(
                task_id=t.task_id,
                kind=t.kind,
                state=t.state,
                started_at=ms_to_dt(t.start_ms),
                finished_at=ms_to_dt(t.finish_ms),
                elapsed_ms=t.elapsed_ms,
            )
            for t in tasks
        ],
    )
