"""``GET /policy``, ``PUT /policy`` and ``POST /policy/preview``: the operator's
view of and hand on the queue controller. Changes are validated through the policy registry
(422 naming the field), persisted (a restart keeps them) and recorded as a decision."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends, HTTPException, status

from app.api.auth import require
from app.api.control_schemas import PolicyIn, PolicyOut, PreviewOut
from app.api.deps import StateDep, retry_later
from app.api.schemas import ErrorOut
from app.api.state import SidecarState
from app.auth.principal import Role
from app.control.config import ControlConfig
from app.policies.base import PolicyError
from app.services.controller import PREVIEW_RETRY_AFTER_S, Controller, PreviewBusy
from app.yarn.errors import RMError

router = APIRouter(tags=["policy"])


def _controller(state: SidecarState) -> Controller:
    if state.controller is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "the controller is not running")
    return state.controller


def _out(cfg: ControlConfig, source: str) -> PolicyOut:
    return PolicyOut(**cfg.to_dict(), source=source)


def _invalid(exc: PolicyError) -> HTTPException:
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"{exc.field}: {exc.message}")


@router.get("/policy", response_model=PolicyOut, dependencies=[Depends(require(Role.VIEWER))])
async def get_policy(state: StateDep) -> PolicyOut:
    """The active queue policy, its parameters, the mode and the safety limits."""
    controller = _controller(state)
    ctx = await asyncio.to_thread(controller.current, controller.clock())
    return _out(ctx.cfg, ctx.source)


@router.put(
    "/policy",
    dependencies=[Depends(require(Role.OPERATOR))],
    response_model=PolicyOut,
    responses={422: {"model": ErrorOut}, 503: {"model": ErrorOut}},
)
async def put_policy(body: PolicyIn, state: StateDep) -> PolicyOut:
    """Change the policy, parameters, mode or limits; omitted fields keep their value."""
    controller = _controller(state)
    changes = body.changes()
    if body.accept_drift:
        changes["accept_drift"] = True
    try:
        cfg = await controller.set_policy(changes, controller.clock())
    except PolicyError as exc:
        raise _invalid(exc) from exc
    except RMError as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, f"accept_drift: RM unreachable: {exc.message}"
        ) from exc
    return _out(cfg, "operator")


@router.post(
    "/policy/preview",
    dependencies=[Depends(require(Role.VIEWER))],
    response_model=PreviewOut,
    responses={
        422: {"model": ErrorOut},
        429: {
            "model": ErrorOut,
            "description": "The most previews this process computes at once are in progress; "
            "see Retry-After.",
        },
        503: {"model": ErrorOut},
    },
)
async def preview_policy(state: StateDep, body: PolicyIn | None = None) -> PreviewOut:
    """What the policy (or the one in the body) would do now; pushes and stores nothing."""
    controller = _controller(state)
    changes = body.changes() if body is not None else None
    try:
        result = await controller.preview(controller.clock(), changes)
    except PolicyError as exc:
        raise _invalid(exc) from exc
    except PreviewBusy as exc:
        raise retry_later(
            status.HTTP_429_TOO_MANY_REQUESTS, str(exc), PREVIEW_RETRY_AFTER_S
        ) from exc
    except RMError as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, f"RM unreachable: {exc.message}"
        ) from exc
    return PreviewOut(**result)
