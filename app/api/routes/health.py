"""``GET /health`` (the process answers) and ``GET /ready`` (database and RM usable)."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Response, status
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool

import app
from app.api.auth import require
from app.api.deps import StateDep
from app.api.schemas import Health, Ready, ReadyCheck, ms_to_dt
from app.api.state import SidecarState
from app.auth.principal import Role
from app.db import repo
from app.redact import redact_text, redact_url

router = APIRouter(tags=["health"])

# A poll older than this many intervals means the sidecar no longer sees the RM.
STALE_INTERVALS = 3


@router.get("/health", response_model=Health)
def health() -> Health:
    """Liveness: answers whenever the process runs."""
    return Health(status="ok", version=app.__version__)


@router.get(
    "/ready",
    dependencies=[Depends(require(Role.VIEWER))],
    response_model=Ready,
    responses={503: {"model": Ready, "description": "Not ready; the body says why."}},
)
async def ready(state: StateDep, response: Response) -> Ready:
    """Readiness: the database answers and the last good RM poll is recent."""
    db = await run_in_threadpool(_check_db, state)
    mode = state.settings.mode.value
    if db.ok and state.controller is not None:
        # PUT /policy may have changed the mode since start-up; the stored one is the truth.
        controller = state.controller
        try:
            ctx = await run_in_threadpool(controller.current, controller.clock())
            mode = ctx.cfg.mode
        except SQLAlchemyError as exc:
            db = ReadyCheck(ok=False, detail=f"unreachable: {type(exc).__name__}")
    poller = state.poller
    now_ms = int(time.time() * 1000)
    last = poller.last_good_poll_ms if poller else None
    leadership = None
    if state.leadership is not None and db.ok:
        try:
            leadership = await run_in_threadpool(state.leadership.status)
        except SQLAlchemyError as exc:
            db = ReadyCheck(ok=False, detail=f"unreachable: {type(exc).__name__}")
    if leadership is not None and leadership["role"] == "follower" and db.ok:
        # A follower does not poll: the leader's polls, as stored, say whether the RM is seen.
        last = await run_in_threadpool(_stored_last_good_poll, state)
    age = (now_ms - last) / 1000 if last is not None else None
    limit = STALE_INTERVALS * state.settings.poll_interval_s
    if poller is None:
        rm = ReadyCheck(ok=False, detail="poller not running")
    elif last is None:
        rm = ReadyCheck(ok=False, detail=poller.last_error or "no successful poll yet")
    elif leadership is not None and leadership["role"] == "follower" and age is not None:
        fresh = age <= limit
        rm = ReadyCheck(
            ok=fresh,
            detail=f"follower: the leader ({leadership['leader']}) last polled {age:.0f}s ago",
        )
    elif age is not None and age > limit:
        rm = ReadyCheck(
            ok=False, detail=f"last good poll {age:.0f}s ago; {poller.last_error or 'stale'}"
        )
    else:
        rm = ReadyCheck(ok=True, detail="polling")
    rm = ReadyCheck(ok=rm.ok, detail=redact_text(rm.detail))
    ok = db.ok and rm.ok
    if not ok:
        response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    return Ready(
        ready=ok,
        mode=mode,
        database=db,
        resourcemanager=rm,
        last_good_poll=ms_to_dt(last),
        last_good_poll_age_s=age,
        active_rm_url=redact_url(poller.source.active_url)
        if poller and poller.source.active_url
        else None,
        leadership=leadership,
    )


def _stored_last_good_poll(state: SidecarState) -> int | None:
    with state.sessions() as session:
        cluster = repo.get_cluster(session, state.settings.cluster_name)
        return cluster.last_good_poll_ms if cluster is not None else None


def _check_db(state: SidecarState) -> ReadyCheck:
    try:
        with state.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        return ReadyCheck(ok=False, detail=f"unreachable: {type(exc).__name__}")
    return ReadyCheck(ok=True, detail="reachable")
