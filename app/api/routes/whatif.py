"""``POST /whatif``, ``GET /whatif``, ``GET /whatif/{id}`` and its HTML report: the recorded
period replayed under another policy, run in the background (``app.observability.whatif``)."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, status
from fastapi.responses import HTMLResponse

from app.api.auth import Operator
from app.api.deps import StateDep, retry_later
from app.api.observe_schemas import WhatIfIn, WhatIfList, WhatIfPolicies, WhatIfRunOut
from app.api.routes.queues import to_ms
from app.api.schemas import ErrorOut, ms_to_dt
from app.api.state import SidecarState
from app.observability.whatif import WhatIfError, WhatIfSpec, since_ms
from app.observability.whatif_runs import BUSY_RETRY_AFTER_S, WhatIfBusy, WhatIfRun, WhatIfRuns
from app.sim import registry

router = APIRouter(tags=["what-if"])
RunId = Annotated[str, Path(description="Run id from POST /whatif.", max_length=64)]


def _runs(state: SidecarState) -> WhatIfRuns:
    if state.whatif is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "what-if runs are not available")
    return state.whatif


def _out(run: WhatIfRun) -> WhatIfRunOut:
    return WhatIfRunOut(
        id=run.id,
        policy=run.spec.policy,
        status=run.status,
        phase=run.phase,
        progress=run.progress,
        created_at=ms_to_dt(run.created_ms),
        finished_at=ms_to_dt(run.finished_ms),
        error=run.error,
        result=run.summary,
        report_url=f"/whatif/{run.id}/report" if run.html is not None else None,
    )


@router.post(
    "/whatif",
    response_model=WhatIfRunOut,
    status_code=status.HTTP_202_ACCEPTED,
    responses={
        422: {"model": ErrorOut},
        429: {
            "model": ErrorOut,
            "description": "The most runs this process takes are already queued or running; "
            "nothing was queued. See Retry-After.",
        },
    },
)
def start_whatif(body: WhatIfIn, state: StateDep, _operator: Operator) -> WhatIfRunOut:
    """Replay the recorded period under ``policy`` in the background; poll the run for progress."""
    try:
        until_ms = to_ms(body.until) if body.until else int(time.time() * 1000)
        spec = WhatIfSpec(
            policy=body.policy,
            since_ms=since_ms(body.since, until_ms) if body.since else None,
            until_ms=until_ms,
            capacity_vcores=body.capacity_vcores,
            params=dict(body.params),
            interval_s=body.interval_s,
        )
        run = _runs(state).start(spec)
    except WhatIfError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from exc
    except WhatIfBusy as exc:
        raise retry_later(status.HTTP_429_TOO_MANY_REQUESTS, str(exc), BUSY_RETRY_AFTER_S) from exc
    return _out(run)


@router.get("/whatif/policies", response_model=WhatIfPolicies)
def whatif_policies() -> WhatIfPolicies:
    """The simulator's policies a what-if can replay under."""
    return WhatIfPolicies(policies=registry.policy_names(), need_deadlines=list(registry.ADMISSION))


@router.get("/whatif", response_model=WhatIfList)
def list_whatif(state: StateDep) -> WhatIfList:
    """The last runs of this process, newest first."""
    return WhatIfList(items=[_out(r) for r in _runs(state).recent()])


def _get(state: SidecarState, run_id: str) -> WhatIfRun:
    run = _runs(state).get(run_id)
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"run_id: no what-if run {run_id}")
    return run


@router.get("/whatif/{run_id}", response_model=WhatIfRunOut, responses={404: {"model": ErrorOut}})
def get_whatif(state: StateDep, run_id: RunId) -> WhatIfRunOut:
    """One run: status, progress and, when done, actual vs replay."""
    return _out(_get(state, run_id))


@router.get(
    "/whatif/{run_id}/report",
    # Errors are JSON like everywhere else; only the report itself is HTML.
    responses={
        200: {"content": {"text/html": {"schema": {"type": "string"}}}},
        404: {"model": ErrorOut},
    },
)
def whatif_report(state: StateDep, run_id: RunId) -> HTMLResponse:
    """The run's self-contained HTML report, as a download."""
    run = _get(state, run_id)
    if run.html is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"run_id: run {run_id} has no report yet")
    return HTMLResponse(
        run.html,
        headers={"Content-Disposition": f'attachment; filename="whatif-{run.id}.html"'},
    )
