"""``GET /health`` (the process answers) and ``GET /ready`` (database and RM usable)."""

from __future__ import annotations

import time

from fastapi import APIRouter, Response, status
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

import app
from app.api.deps import StateDep
from app.api.schemas import Health, Ready, ReadyCheck, ms_to_dt

router = APIRouter(tags=["health"])

# A poll older than this many intervals means the sidecar no longer sees the RM.
STALE_INTERVALS = 3


@router.get("/health", response_model=Health)
def health() -> Health:
    """Liveness: answers whenever the process runs."""
    return Health(status="ok", version=app.__version__)


@router.get(
    "/ready",
    response_model=Ready,
    responses={503: {"model": Ready, "description": "Not ready; the body says why."}},
)
def ready(state: StateDep, response: Response) -> Ready:
    """Readiness: the database answers and the last good RM poll is recent."""
    try:
        with state.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        db = ReadyCheck(ok=True, detail="reachable")
    except SQLAlchemyError as exc:
        db = ReadyCheck(ok=False, detail=f"unreachable: {type(exc).__name__}")
    poller = state.poller
    now_ms = int(time.time() * 1000)
    last = poller.last_good_poll_ms if poller else None
    age = (now_ms - last) / 1000 if last is not None else None
    limit = STALE_INTERVALS * state.settings.poll_interval_s
    if poller is None:
        rm = ReadyCheck(ok=False, detail="poller not running")
    elif last is None:
        rm = ReadyCheck(ok=False, detail=poller.last_error or "no successful poll yet")
    elif age is not None and age > limit:
        rm = ReadyCheck(
            ok=False, detail=f"last good poll {age:.0f}s ago; {poller.last_error or 'stale'}"
        )
    else:
        rm = ReadyCheck(ok=True, detail="polling")
    ok = db.ok and rm.ok
    if not ok:
        response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    return Ready(
        ready=ok,
        mode=state.settings.mode.value,
        database=db,
        resourcemanager=rm,
        last_good_poll=ms_to_dt(last),
        last_good_poll_age_s=age,
        active_rm_url=poller.source.active_url if poller else None,
    )
