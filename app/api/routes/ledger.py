"""``GET /ledger``: the LTRF ledger from measured usage (``docs/policies.md``,
"Long- Term Resource Fairness"): per queue, entitlement, usage and debt over time."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Annotated

from fastapi import APIRouter, Query

from app.api.control_schemas import LedgerOut, LedgerPoint, LedgerQueue
from app.api.deps import SessionDep, StateDep
from app.api.routes.queues import to_ms
from app.api.schemas import ms_to_dt
from app.db import control_repo, repo
from app.db.control_models import LedgerEntry

router = APIRouter(tags=["ledger"])


def _point(row: LedgerEntry) -> LedgerPoint:
    return LedgerPoint(
        start=ms_to_dt(row.start_ms),
        end=ms_to_dt(row.end_ms),
        weight=row.weight,
        entitlement=row.entitlement,
        usage=row.usage,
        counted=row.counted,
        debt=row.debt,
        total_usage=row.total_usage,
        total_counted=row.total_counted,
        lent=row.lent or 0.0,
        borrowed=row.borrowed or 0.0,
        lent_to=dict(row.lent_to or {}),
    )


@router.get("/ledger", response_model=LedgerOut)
def get_ledger(
    session: SessionDep,
    state: StateDep,
    since: Annotated[
        dt.datetime | None, Query(description="ISO 8601: intervals ending at or after it.")
    ] = None,
    queue: Annotated[str | None, Query(description="One queue's full path.")] = None,
    limit: Annotated[
        int, Query(ge=1, le=100_000, description="Most intervals (rows), the newest kept.")
    ] = 10_000,
) -> LedgerOut:
    """Per queue: the newest ``limit`` integrated intervals (from ``since``), oldest first, with
    their totals; ``truncated`` when older intervals were left out."""
    cluster = repo.get_cluster(session, state.settings.cluster_name)
    if cluster is None:
        return LedgerOut(queues=[])
    rows, truncated = control_repo.list_ledger(
        session, cluster.id, to_ms(since) if since else None, queue, limit
    )
    by_queue: dict[str, list[LedgerEntry]] = defaultdict(list)
    for row in rows:
        by_queue[row.queue].append(row)
    return LedgerOut(
        queues=[
            LedgerQueue(
                queue=q,
                entitlement=sum(r.entitlement for r in items),
                usage=sum(r.usage for r in items),
                debt=items[-1].debt,
                points=[_point(r) for r in items],
            )
            for q, items in sorted(by_queue.items())
        ],
        truncated=truncated,
    )
