"""``GET /metrics``: Prometheus text exposition of the sidecar's own health and the latest queue
samples, so operators can alert on a stale poller and graph what the policies see."""

from __future__ import annotations

import time
from collections.abc import Iterable

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse
from sqlalchemy import func, select

from app.api.deps import SessionDep, StateDep
from app.db import repo
from app.db.models import Application

router = APIRouter(tags=["metrics"])

_QUEUE_GAUGES = (
    ("capacity_percent", "configured capacity, % of the parent", "capacity"),
    ("used_capacity_percent", "% of the queue's own capacity in use", "used_capacity"),
    ("absolute_used_capacity_percent", "% of the cluster the queue uses", "absolute_used_capacity"),
    ("used_vcores", "vcores allocated to the queue", "used_vcores"),
    ("used_memory_mb", "memory allocated to the queue", "used_memory_mb"),
    ("pending_vcores", "vcores asked for and not yet allocated", "pending_vcores"),
    ("pending_containers", "containers asked for and not yet allocated", "pending_containers"),
    ("running_apps", "active applications", "running_apps"),
    ("pending_apps", "applications waiting to be activated", "pending_apps"),
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _family(name: str, kind: str, help_text: str, samples: Iterable[str]) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(state: StateDep, session: SessionDep) -> PlainTextResponse:
    """Prometheus metrics (text format 0.0.4)."""
    lines: list[str] = []
    poller = state.poller
    now_ms = int(time.time() * 1000)
    if poller is not None:
        lines += _family(
            "yarn_sidecar_poll_ticks_total",
            "counter",
            "poller ticks run",
            [f"yarn_sidecar_poll_ticks_total {poller.ticks}"],
        )
        lines += _family(
            "yarn_sidecar_poll_consecutive_failures",
            "gauge",
            "failed polls in a row",
            [f"yarn_sidecar_poll_consecutive_failures {poller.failures}"],
        )
        if poller.last_good_poll_ms is not None:
            age = (now_ms - poller.last_good_poll_ms) / 1000
            lines += _family(
                "yarn_sidecar_last_good_poll_age_seconds",
                "gauge",
                "seconds since the last successful RM poll",
                [f"yarn_sidecar_last_good_poll_age_seconds {age:.3f}"],
            )
    cluster = repo.get_cluster(session, state.settings.cluster_name)
    if cluster is not None:
        counts = session.execute(
            select(Application.state, func.count())
            .where(Application.cluster_id == cluster.id)
            .group_by(Application.state)
        ).all()
        lines += _family(
            "yarn_sidecar_apps_recorded",
            "gauge",
            "recorded applications by YARN state",
            [f'yarn_sidecar_apps_recorded{{state="{_escape(s)}"}} {n}' for s, n in counts],
        )
        views = [v for v in repo.latest_queues(session, cluster.id) if v.sample is not None]
        for suffix, help_text, attr in _QUEUE_GAUGES:
            name = f"yarn_sidecar_queue_{suffix}"
            lines += _family(
                name,
                "gauge",
                help_text,
                [
                    f'{name}{{queue="{_escape(v.queue.path)}"}} {getattr(v.sample, attr)}'
                    for v in views
                ],
            )
    return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")
