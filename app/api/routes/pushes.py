"""``GET /pushes``: every scheduler-configuration push the controller attempted, with the values it
sent, the values they replaced, the RM's configuration version before and after, and how it
ended (``applied``, ``rejected``, ``not_applied`` and ``unknown`` when settled after a restart,
``pending`` while the PUT is in flight). Each links to its decision in ``GET /decisions``."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from app.api.deps import SessionDep
from app.api.schemas import ms_to_dt
from app.db import control_repo
from app.db.control_models import ConfigPush

router = APIRouter(tags=["decisions"])


class PushOut(BaseModel):
    id: int
    pushed_at: dt.datetime = Field(description="When the tick decided it.")
    parent: str
    status: str = Field(
        description="pending (in flight, or sent and not answered), applied, rejected, "
        "unavailable (reached no RM), conflict (nothing sent: the configuration version moved "
        "after the tick read it), reverted, revert_failed, superseded, baseline (an accepted "
        "live configuration), not_applied or unknown (settled by a later tick from the RM's "
        "configuration version and values)."
    )
    values: dict[str, Any] = Field(description="What was sent, per queue.")
    previous: dict[str, Any] = Field(description="What the RM held before, per queue.")
    version_before: int | None
    version_after: int | None
    decision_id: int | None = Field(description="Its decision (GET /decisions/{id}).")


class PushPage(BaseModel):
    items: list[PushOut]
    next_before: int | None = Field(description="Pass as ?before= for the next page.")


def _out(row: ConfigPush) -> PushOut:
    return PushOut(
        id=row.id,
        pushed_at=ms_to_dt(row.pushed_ms),
        parent=row.parent,
        status=row.status,
        values=dict(row.values or {}),
        previous=dict(row.previous or {}),
        version_before=row.version_before,
        version_after=row.version_after,
        decision_id=row.decision_id,
    )


@router.get("/pushes", response_model=PushPage)
def list_pushes(
    session: SessionDep,
    status: Annotated[str | None, Query(description="Only pushes with this status.")] = None,
    before: Annotated[
        int | None, Query(ge=1, le=2**63 - 1, description="Only pushes older than this.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> PushPage:
    """Scheduler-configuration pushes, newest first."""
    rows = control_repo.list_pushes(session, limit + 1, before, status)
    more = len(rows) > limit
    items = [_out(r) for r in rows[:limit]]
    return PushPage(items=items, next_before=items[-1].id if more and items else None)
