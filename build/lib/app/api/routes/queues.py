"""``GET /queues``: the latest state of every queue, or its history with ``?since=``."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import SessionDep, StateDep
from app.api.schemas import QueueList, QueueOut, ms_to_dt
from app.db import repo

router = APIRouter(tags=["queues"])


def to_ms(value: dt.datetime) -> int:
    """An API datetime (naive means UTC) as epoch milliseconds."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return int(value.timestamp() * 1000)


def _queue_out(view: repo.QueueView) -> QueueOut:
    q, s = view.queue, view.sample
    out = QueueOut(
        path=q.path,
        name=q.name,
        parent=q.parent_path,
        is_leaf=q.is_leaf,
        state=q.state,
        configured_capacity=q.capacity,
        configured_max_capacity=q.max_capacity,
        sampled_at=ms_to_dt(s.taken_ms) if s else None,
    )
    if s is not None:
        out = out.model_copy(
            update={
                "capacity": s.capacity,
                "max_capacity": s.max_capacity,
                "used_capacity": s.used_capacity,
                "absolute_capacity": s.absolute_capacity,
                "absolute_used_capacity": s.absolute_used_capacity,
                "used_vcores": s.used_vcores,
                "used_memory_mb": s.used_memory_mb,
                "pending_vcores": s.pending_vcores,
                "pending_memory_mb": s.pending_memory_mb,
                "pending_containers": s.pending_containers,
                "running_apps": s.running_apps,
                "pending_apps": s.pending_apps,
            }
        )
    return out


@router.get("/queues", response_model=QueueList)
def list_queues(
    state: StateDep,
    session: SessionDep,
    since: Annotated[
        dt.datetime | None,
        Query(description="ISO 8601 time; returns every sample taken since then, oldest first."),
    ] = None,
    path: Annotated[str | None, Query(description="Only this queue (full path).")] = None,
    limit: Annotated[int, Query(ge=1, le=100_000)] = 10_000,
) -> QueueList:
    """Latest state per queue; with ``since``, the sampled history."""
    cluster = repo.get_cluster(session, state.settings.cluster_name)
    if cluster is None:
        return QueueList(items=[])
    if since is None:
        views = repo.latest_queues(session, cluster.id)
        if path is not None:
            views = [v for v in views if v.queue.path == path]
    else:
        views = repo.queue_history(session, cluster.id, to_ms(since), path=path, limit=limit)
    return QueueList(items=[_queue_out(v) for v in views])
