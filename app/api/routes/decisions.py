"""``GET /decisions`` (filters, cursor pagination) and ``GET /decisions/{id}``: the audit trail of
the controller and of every other decision the sidecar records."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, status

from app.api.control_schemas import DecisionDetail, DecisionPage, DecisionSummary
from app.api.deps import SessionDep
from app.api.params import cursor_errors, require_choice
from app.api.routes.queues import to_ms
from app.api.schemas import ErrorOut, ms_to_dt
from app.db import control_repo
from app.db.models import Decision

router = APIRouter(tags=["decisions"])

# What records decisions: the queue controller's ticks, policy changes, admission rounds, and
# HybridMR placement of observed jobs (``app/services/placement.py``).
DECISION_KINDS = ("queue", "policy", "admission", "placement")


def summary(row: Decision) -> DecisionSummary:
    """A decision row as the list shows it."""
    return DecisionSummary(
        id=row.id,
        created_at=ms_to_dt(row.created_ms),
        kind=row.kind,
        policy=row.policy,
        mode=row.mode,
        status=row.status,
        reason=row.reason,
        pushed=row.pushed,
    )


@router.get("/decisions", response_model=DecisionPage, responses={400: {"model": ErrorOut}})
def list_decisions(
    session: SessionDep,
    kind: Annotated[str | None, Query(description=f"One of {', '.join(DECISION_KINDS)}.")] = None,
    policy: Annotated[
        str | None, Query(description="Policy name; 'fawkes' matches every weighting.")
    ] = None,
    status_: Annotated[str | None, Query(alias="status", description="e.g. pushed, drift.")] = None,
    since: Annotated[dt.datetime | None, Query(description="ISO 8601, inclusive.")] = None,
    until: Annotated[dt.datetime | None, Query(description="ISO 8601, exclusive.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page.")] = None,
) -> DecisionPage:
    """Recorded decisions, newest first."""
    require_choice(kind, DECISION_KINDS, "kind")
    flt = control_repo.DecisionFilter(
        kind=kind,
        policy=policy,
        status=status_,
        since_ms=to_ms(since) if since else None,
        until_ms=to_ms(until) if until else None,
    )
    with cursor_errors():
        rows, next_cursor = control_repo.list_decisions(session, flt, limit, cursor)
    return DecisionPage(items=[summary(r) for r in rows], next_cursor=next_cursor)


@router.get(
    "/decisions/{decision_id}", response_model=DecisionDetail, responses={404: {"model": ErrorOut}}
)
def get_decision(
    session: SessionDep,
    decision_id: Annotated[int, Path(description="Decision id.", ge=1, le=2**63 - 1)],
) -> DecisionDetail:
    """One decision with its inputs, the intermediate numbers and the RM's answer."""
    row = control_repo.get_decision(session, decision_id)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"decision_id: no decision {decision_id}")
    return DecisionDetail(
        **summary(row).model_dump(),
        params=row.params,
        inputs=row.inputs,
        outputs=row.outputs,
        rm_response=row.rm_response,
        principal=row.principal,
    )
