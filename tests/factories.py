"""Builders of domain snapshots and stored rows for tests (plain values; every field explicit
where it matters)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.db.jobs_models import Job
from app.domain.model import (
    AppRecord,
    ClusterInfo,
    ClusterMetrics,
    ClusterSnapshot,
    NodeState,
    QueueState,
    Resources,
)

LEAVES = ("default", "etl", "adhoc", "deadline")


def queue(
    path: str, *, capacity: float = 25.0, used_vcores: int = 0, leaf: bool = True
) -> QueueState:
    name = path.rsplit(".", 1)[-1]
    parent = path.rsplit(".", 1)[0] if "." in path else None
    return QueueState(
        path=path,
        name=name,
        parent=parent,
        is_leaf=leaf,
        state="RUNNING",
        capacity=capacity,
        max_capacity=100.0,
        used_capacity=0.0,
        absolute_capacity=capacity,
        absolute_max_capacity=100.0,
        absolute_used_capacity=0.0,
        used=Resources(used_vcores, used_vcores * 1024),
        pending=Resources(0, 0),
        num_applications=0,
        num_active_apps=0,
        num_pending_apps=0,
        pending_containers=0,
        allocated_containers=used_vcores,
    )


def app(
    app_id: str,
    *,
    queue: str = "etl",
    state: str = "RUNNING",
    submitted_ms: int = 1_000,
    finished_ms: int | None = None,
    tags: tuple[str, ...] = (),
    user: str = "alice",
    vcore_seconds: int = 0,
) -> AppRecord:
    final = state in ("FINISHED", "FAILED", "KILLED")
    return AppRecord(
        app_id=app_id,
        user=user,
        queue=queue,
        name=f"job {app_id}",
        app_type="YARN",
        tags=tags,
        state=state,
        final_status="SUCCEEDED" if state == "FINISHED" else ("UNDEFINED" if not final else state),
        progress=100.0 if final else 10.0,
        submitted_ms=submitted_ms,
        started_ms=submitted_ms,
        launched_ms=submitted_ms + 100,
        finished_ms=finished_ms,
        elapsed_ms=(finished_ms - submitted_ms) if finished_ms else 0,
        allocated=Resources(0, 0) if final else Resources(2, 2048),
        vcore_seconds=vcore_seconds,
        memory_seconds=vcore_seconds * 1024,
        running_containers=0 if final else 2,
        priority=0,
    )


def snapshot(
    taken_ms: int,
    apps: tuple[AppRecord, ...] = (),
    *,
    queues: tuple[QueueState, ...] | None = None,
    rm_url: str = "http://rm1:8088",
) -> ClusterSnapshot:
    qs = queues or (
        queue("root", capacity=100.0, leaf=False),
        *(queue(f"root.{n}") for n in LEAVES),
    )
    info = ClusterInfo(1, 1, "STARTED", "ACTIVE", "3.5.0", "3.5.0")
    metrics = ClusterMetrics(
        apps_submitted=len(apps),
        apps_completed=sum(a.is_finished for a in apps),
        apps_pending=0,
        apps_running=sum(not a.is_finished for a in apps),
        total=Resources(8, 8192),
        allocated=Resources(0, 0),
        available=Resources(8, 8192),
        pending=Resources(0, 0),
        containers_allocated=0,
        containers_pending=0,
        active_nodes=1,
        total_nodes=1,
    )
    node = NodeState(
        "localhost:1234",
        "localhost",
        "/default-rack",
        "RUNNING",
        (),
        Resources(8, 8192),
        Resources(0, 0),
        0,
    )
    return ClusterSnapshot(taken_ms, rm_url, info, metrics, qs, apps, (node,))


__all__ = ["app", "job_row", "queue", "replace", "snapshot"]


def job_row(
    job_id: str,
    *,
    state: str,
    submitted_ms: int,
    tasks: int = 4,
    deadline_s: float = 600.0,
    **fields: Any,
) -> Job:
    """A deadline job's row as the sidecar stores it: in ``root.deadline``, due ``deadline_s``
    after its submission, no run or tags; ``fields`` set or override the rest (its grant, app,
    times)."""
    values: dict[str, Any] = {
        "id": job_id,
        "name": job_id,
        "queue": "root.deadline",
        "state": state,
        "requested_tasks": tasks,
        "input_bytes": None,
        "block_size": None,
        "deadline_s": deadline_s,
        "deadline_ms": submitted_ms + int(deadline_s * 1000),
        "submitted_ms": submitted_ms,
        "run": {},
        "tags": [],
        "request_hash": "0" * 64,
        "reason": "",
        "updated_ms": submitted_ms,
    }
    return Job(**(values | fields))
